#!/usr/bin/env bash
# Ship trained GEC models: an inference-only float16 copy of each checkpoint (weights and config; no optimizer
# state, no paths of this machine), the sentencepiece model (without the paths it was trained from), the joined
# dictionary (as dict.src.txt and dict.tgt.txt) and a dozen learner sentences, into OUT_DIR, where
# `python -m fairseq_plugins.quickstart --model gec` finds them (docs/gec.md, "Ship").
#   bash recipes/gec/ship.sh                                     # gec-6x6 and gec-12x2, each SAVE_DIR's best
#   MODELS=gec-6x6 CHECKPOINT_NAME=checkpoint_last.pt bash recipes/gec/ship.sh
#   MODELS="gec-6x6=path/to/checkpoint_3_6000.pt" OUT_DIR=/tmp/gec bash recipes/gec/ship.sh
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

max_bytes=$(awk -v mb="$MAX_MB" 'BEGIN { printf "%d", mb * 1048576 }')
# ship SOURCE NAME: copy SOURCE to OUT_DIR/NAME; die in one line instead when SOURCE is over MAX_MB
ship() {
  local size; size=$(wc -c < "$1")
  [ "$size" -le "$max_bytes" ] || die "$2 would be $(awk -v b="$size" 'BEGIN { printf "%.2f", b / 1048576 }') MiB," \
    "over MAX_MB=$MAX_MB: not shipped"
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
"$PYTHON" - "$SPM_MODEL" "$tmp/sentencepiece.model" <<'EOF'
import sys


def varint(data, i):
    """The varint at data[i:] and the index after it."""
    value = shift = 0
    while True:
        value |= (data[i] & 0x7F) << shift
        shift += 7
        i += 1
        if data[i - 1] < 0x80:
            return value, i


def encode_varint(value):
    out = bytearray()
    while True:
        out.append((value & 0x7F) | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


def fields(data):
    """(field number, wire type, raw bytes of the whole field, payload of a length-delimited field) of a message."""
    i = 0
    while i < len(data):
        start = i
        key, i = varint(data, i)
        number, wire = key >> 3, key & 7
        payload = None
        if wire == 0:
            _, i = varint(data, i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            size, i = varint(data, i)
            payload, i = data[i: i + size], i + size
        else:
            sys.exit(f"{sys.argv[1]}: not a sentencepiece model (wire type {wire})")
        yield number, wire, data[start: i], payload


TRAINER_SPEC, INPUT, MODEL_PREFIX = 2, 1, 2  # ModelProto.trainer_spec; TrainerSpec.input and .model_prefix
model = open(sys.argv[1], "rb").read()
out = bytearray()
for number, wire, raw, payload in fields(model):
    if number == TRAINER_SPEC and wire == 2:
        spec = b"".join(r for n, _, r, _ in fields(payload) if n not in (INPUT, MODEL_PREFIX))
        raw = encode_varint(TRAINER_SPEC << 3 | 2) + encode_varint(len(spec)) + spec
    out += raw
open(sys.argv[2], "wb").write(out)
EOF
"$PYTHON" -c 'import sentencepiece as s, sys; a, b = (s.SentencePieceProcessor(model_file=f) for f in sys.argv[1:])
assert [a.id_to_piece(i) for i in range(a.get_piece_size())] == [b.id_to_piece(i) for i in range(b.get_piece_size())]
' "$SPM_MODEL" "$tmp/sentencepiece.model" || die "$SPM_MODEL: its copy without paths has other pieces"
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
