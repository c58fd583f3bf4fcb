#!/usr/bin/env bash
# A GEC model's latency tables in docs/gec.md, from a clone (after `bash install.sh`): JFLEG dev and CoNLL-2013 as
# prepared by recipes/data/prepare-gec-synthetic.sh (test and test1), every row side by side on one thread:
# fairseq greedy (beam1) and beam 5, the plugin's greedy (the lean verifier, nothing drafted), iad (input-guided
# aggressive decoding: the draft is a copy of the source) with its defaults, with a 2-token suffix match and with
# drafts of at most 8 tokens, bound (one teacher-forced pass of the same lean verifier: the ceiling of any drafting),
# CTranslate2 greedy and beam 5 (float32, int8, int16, bfloat16: those it runs here); tokens per iteration,
# outputs differing from greedy's, and the test set's own score (GLEU against JFLEG's 4 references, edit F0.5
# against CoNLL-2013's gold edits: fairseq_plugins/scripts/gec_score.py). One section of DOC per test set and
# batch size (<!-- bench:gec-cpu-jfleg-b1 --> ...), nothing else of DOC changes. --profile (an extra argument)
# adds each iteration's cost by part.
#   bash recipes/benchmark-gec.sh                                   # both test sets at batch 1 and 32
#   MODEL=$RUNS/gec-synth/transformer-6x6/checkpoint_best.pt bash recipes/benchmark-gec.sh
#   TEST_SETS=conll2013 BATCH_SIZES=1 MAX_SENTENCES=200 DOC=/elsewhere/gec.md bash recipes/benchmark-gec.sh
#   DRY_RUN=1 bash recipes/benchmark-gec.sh                         # the first 20 sentences, into OUT_DIR/gec.md
#   OTHER_MODELS="12x2=$RUNS/gec-synth/transformer-12x2/checkpoint_best.pt" bash recipes/benchmark-gec.sh
# OTHER_MODELS ("NAME=CHECKPOINT ...", default: the shipped gec-12x2.pt beside the default MODEL) are decoded in the
# same tables, rows OTHER_DECODERS:model=NAME, timed against MODEL's beam1 and greedy (the 12+2 against the 6+6).
# The references are read from GEC_DATA_DIR (jfleg/dev/, conll2013/revised/). JSON and the CTranslate2 conversion
# go under OUT_DIR. Extra arguments go to the harness (python -m fairseq_plugins.bench.latency --help).
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"

SHIPPED=$REPO/checkpoints/gec
MODEL=${MODEL:-$SHIPPED/gec-6x6.pt}
if [ "$MODEL" = "$SHIPPED/gec-6x6.pt" ] && [ -f "$SHIPPED/gec-12x2.pt" ]; then OTHER_DEFAULT="12x2=$SHIPPED/gec-12x2.pt"
else OTHER_DEFAULT=""; fi
OTHER_MODELS=${OTHER_MODELS-$OTHER_DEFAULT}
OTHER_DECODERS=${OTHER_DECODERS:-beam1,greedy,iad}   # the rows of each other model
DATA=${DATA:-$RUNS/gec-synth/bin}               # prepare-gec-synthetic.sh's binarized data
GEC_DATA_DIR=${GEC_DATA_DIR:-$(dirname "$REPO")/shared/data}
TEST_SETS=${TEST_SETS:-jfleg conll2013}
BATCH_SIZES=${BATCH_SIZES:-1 32}                # one table (section) per test set and batch size
THREADS=${THREADS:-1}                           # torch and CTranslate2 threads
DECODERS=${DECODERS:-beam1,greedy,iad,iad:match_length=2,iad:block=8,bound,beam5}
CT2_COMPUTE_TYPES=${CT2_COMPUTE_TYPES:-auto}  # the CPU's of float32, int8, int16, bfloat16 (e.g. float32,int8)
SECTION_PREFIX=${SECTION_PREFIX:-gec-cpu}       # e.g. gec-gpu with the extra arguments --device cuda
if [ "$DRY_RUN" = 1 ]; then
  MAX_SENTENCES=${MAX_SENTENCES:-20}; WARMUP=${WARMUP:-2}
  OUT_DIR=${OUT_DIR:-$RUNS/benchmark-gec-dry}; DOC=${DOC:-$OUT_DIR/gec.md}
fi
MAX_SENTENCES=${MAX_SENTENCES:-0}               # 0: the whole test set (754 JFLEG, 1,381 CoNLL-2013 sentences)
WARMUP=${WARMUP:-10}
OUT_DIR=${OUT_DIR:-$RUNS/benchmark-gec}
DOC=${DOC:-$REPO/docs/gec.md}
declare -A SPLIT=([jfleg]=test [conll2013]=test1)   # prepare-gec-synthetic.sh's split of each test set
for name in $TEST_SETS; do
  [ -n "${SPLIT[$name]:-}" ] || die "TEST_SETS: $name is not one of: ${!SPLIT[*]}"
  all_exist "$DATA/${SPLIT[$name]}.src-tgt.src.bin" || die "no prepared GEC data in DATA=$DATA" \
    "($name: ${SPLIT[$name]}.src-tgt.src.bin): run bash recipes/data/prepare-gec-synthetic.sh"
done
all_exist "$MODEL" || die "no GEC model at MODEL=$MODEL: train one (SETTING=gec-6x6 bash recipes/train-at.sh), then" \
  "ship it (bash recipes/gec/ship.sh) or pass MODEL=\$RUNS/gec-synth/transformer-6x6/checkpoint_best.pt"
need_fairseq

# paths as given (absolute before the cd), then relative to the clone (they are printed in the tables)
MODEL=$(abspath "$MODEL"); DATA=$(abspath "$DATA"); GEC_DATA_DIR=$(abspath "$GEC_DATA_DIR")
OUT_DIR=$(abspath "$OUT_DIR"); DOC=$(abspath "$DOC")
models=() decoders=$DECODERS others=()
for other in $OTHER_MODELS; do
  name=${other%%=*} path=${other#*=}
  [ "$name" != "$other" ] && [ -n "$name" ] || die "OTHER_MODELS: expected NAME=CHECKPOINT, got $other"
  all_exist "$path" || die "OTHER_MODELS: no model at $path ($name)"
  others+=("$name=$(abspath "$path")")
done
cd "$REPO"
for other in ${others[@]+"${others[@]}"}; do
  name=${other%%=*} path=${other#*=}
  models+=(--model "$name=$(relative "$path")")
  for decoder in ${OTHER_DECODERS//,/ }; do decoders+=",$decoder:model=$name"; done
done
for name in $TEST_SETS; do
  for bs in ${BATCH_SIZES//,/ }; do   # "1 32" or 1,32
    section=$SECTION_PREFIX-$name-b$bs
    log "latency of $(relative "$MODEL") on $name (batch $bs, $THREADS thread(s)) -> $DOC, section $section"
    OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS "$PYTHON" -m fairseq_plugins.bench.latency \
      "$(relative "$DATA")" --path "$(relative "$MODEL")" --source-lang src --target-lang tgt \
      --gen-subset "${SPLIT[$name]}" --score "$name" --score-data-dir "$GEC_DATA_DIR" --remove-bpe sentencepiece \
      --max-len-a 1.2 --max-len-b 10 --batch-sizes "$bs" --threads "$THREADS" --warmup "$WARMUP" \
      --max-sentences "$MAX_SENTENCES" --decoders "$decoders" "${models[@]}" --ct2-compute-types "$CT2_COMPUTE_TYPES" \
      --ct2-dir "$OUT_DIR/ct2" --out-md "$DOC" --md-section "$section" --out-json "$OUT_DIR/$section.json" \
      --no-progress-bar "$@" >&2
  done
done
log "done: $DOC"
echo "$DOC"
