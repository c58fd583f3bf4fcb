#!/usr/bin/env bash
# Ship trained GEC models: an inference-only float16 copy of each checkpoint (weights and config; no optimizer
# state, no paths of this machine), the sentencepiece model (without the paths it was trained from), the joined
# dictionary (as dict.src.txt and dict.tgt.txt) and a dozen learner sentences, into OUT_DIR, where
# `python -m fairseq_plugins.quickstart --model gec` finds them (docs/gec.md, "Ship").
#   bash recipes/gec/ship.sh                                     # gec-6x6 and gec-12x2, each SAVE_DIR's best
#   MODELS=gec-6x6 CHECKPOINT_NAME=checkpoint_last.pt bash recipes/gec/ship.sh
#   MODELS="gec-6x6=path/to/checkpoint_3_6000.pt" OUT_DIR=../runs/gec-models bash recipes/gec/ship.sh
# Every file must stay within MAX_MB MiB (2^20 bytes, as GitHub counts): a larger one is a one-line error and is not
# written.
set -euo pipefail
. "$(dirname "$0")/../lib/common.sh"
# NAME (a setting of recipes/settings: its SAVE_DIR/CHECKPOINT_NAME) or NAME=CHECKPOINT; each -> OUT_DIR/NAME.pt
MODELS=${MODELS:-gec-6x6 gec-12x2}
CHECKPOINT_NAME=${CHECKPOINT_NAME:-checkpoint_best.pt}
DATA=${DATA:-$RUNS/gec-synth/bin}                        # dict.src.txt (= dict.tgt.txt: one joined dictionary)
SPM_MODEL=${SPM_MODEL:-$(dirname "$DATA")/spm/spm.model}
OUT_DIR=${OUT_DIR:-$REPO/checkpoints/gec}
MAX_MB=${MAX_MB:-20}

# ship SOURCE NAME: copy SOURCE to OUT_DIR/NAME; die in one line instead when SOURCE is over MAX_MB
ship() {
  check_shippable "$1" "$2"
  cp "$1" "$OUT_DIR/$2"
}

# checkpoint_of ENTRY: the checkpoint an entry of MODELS names (NAME: a setting's SAVE_DIR/CHECKPOINT_NAME)
checkpoint_of() {
  case $1 in
    *=*) echo "${1#*=}" ;;
    *) (unset SAVE_DIR; . "$REPO/recipes/settings/$1.sh"; echo "$SAVE_DIR/$CHECKPOINT_NAME") ;;
  esac
}

need_fairseq
declare -A checkpoints=()
for entry in $MODELS; do
  case $entry in *=*) ;; *) [ -f "$REPO/recipes/settings/$entry.sh" ] \
    || die "MODELS: $entry is not a setting of recipes/settings (give $entry=CHECKPOINT)" ;; esac
  checkpoints[${entry%%=*}]=$(checkpoint_of "$entry")
done
inputs=("DATA=$DATA/dict.src.txt" "SPM_MODEL=$SPM_MODEL")
for name in "${!checkpoints[@]}"; do inputs+=("$name=${checkpoints[$name]}"); done
check_inputs "${inputs[@]}"
mkdir -p "$OUT_DIR"
tmp=$(mktemp -d "$OUT_DIR/.ship.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

for name in $(printf '%s\n' "${!checkpoints[@]}" | sort); do
  log "$name: ${checkpoints[$name]} -> $OUT_DIR/$name.pt"
  "$PYTHON" -m fairseq_plugins.scripts.export_checkpoint "${checkpoints[$name]}" "$tmp/$name.pt" --fp16 >&2
  ship "$tmp/$name.pt" "$name.pt"
done

# the sentencepiece model without its trainer's input files and output prefix (paths of the machine that made it)
"$PYTHON" "$REPO/recipes/lib/spm.py" strip-paths --model "$SPM_MODEL" --output "$tmp/sentencepiece.model"
ship "$tmp/sentencepiece.model" sentencepiece.model
ship "$DATA/dict.src.txt" dict.src.txt
ship "$DATA/dict.src.txt" dict.tgt.txt

# learner English written for the demo (none from JFLEG or CoNLL), tokenized as those sets are
cat > "$tmp/sentences.txt" <<'EOF'
I am agree with you that the life in big city is more harder than in village .
She do n't like to go to the school by bus every days .
Yesterday I have went to the market for buy some vegetable .
My brother is study in university since two years .
There are many peoples which wants to travel in abroad .
If I will have more time , I would learn to play guitar .
He said me that he can not come to my party tomorow .
The informations in this book is very usefull for students .
We was very exciting when our teacher tell us about the trip .
In my opinion , the goverment should to spend more money for education .
Everybody know that smoking is bad for the healthy .
I am looking forward to hear from you soon .
EOF
ship "$tmp/sentences.txt" sentences.txt
log "shipped to $OUT_DIR: $(cd "$OUT_DIR" && ls | tr '\n' ' ')"
