#!/usr/bin/env bash
# The shipped demo pair's latency tables in docs/benchmarks.md, from a fresh clone (after `bash install.sh`):
# Multi30k test2016 prepared with the pair's own sentencepiece model and dictionaries, then every row side by side
# at batch 1, one thread: fairseq greedy (beam1) and beam 5, the plugin's greedy (the lean verifier, nothing
# drafted), specdec, specdec++ with drafter-beam5.pt (where the pair has one), iad, jacobi, gs-jacobi, oracle,
# bound, drafter-only, greedy, specdec and iad with int8 products (--verifier-matmul int8), greedy and specdec with
# bfloat16 products (--verifier-matmul bf16, where the CPU has the kernels), CTranslate2 greedy and beam 5 in each
# of float32, int8, int16 and bfloat16 that this CPU's CTranslate2 runs (CT2_COMPUTE_TYPES).
# Each table replaces its section of DOC (<!-- bench:demo-cpu-b1 --> ...), nothing else.
#   bash recipes/benchmark-demo.sh                         # test2016, batch 1: section demo-cpu-b1
#   BATCH_SIZES="1 32" TEST_SPLITS="test test1" bash recipes/benchmark-demo.sh
#                                                          # + demo-cpu-b32, demo-cpu-test2017-b1, demo-cpu-test2017-b32
#   DRY_RUN=1 bash recipes/benchmark-demo.sh               # quick: the first 20 sentences, into OUT_DIR/benchmarks.md
#   DEMO=pair SECTION_PREFIX=base-cpu bash recipes/benchmark-demo.sh   # another Multi30k en-de pair laid out as
#                                                          # checkpoints/demo (recipes/multi30k-base.sh makes one)
# Raw Multi30k (train, val, test_2016_flickr, test_2017_flickr .{en,de}, or the fairseq names train, valid, test,
# test1) from MULTI30K_DIR, else downloaded (not in DRY_RUN). Data, JSON and the CTranslate2 conversion go under
# OUT_DIR; done stages are skipped. Extra arguments go to the harness (python -m fairseq_plugins.bench.latency --help).
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"

. "$REPO/recipes/lib/demo_data.sh"          # DEMO, MULTI30K_DIR, MULTI30K_URL, demo_test_data
TEST_SPLITS=${TEST_SPLITS:-test}            # test = test2016, test1 = test2017
BATCH_SIZES=${BATCH_SIZES:-1}               # one table (section) per batch size
THREADS=${THREADS:-1}                       # torch and CTranslate2 threads
DECODERS=${DECODERS:-}                      # default: the rows above
CT2_COMPUTE_TYPES=${CT2_COMPUTE_TYPES:-auto}  # the CPU's of float32, int8, int16, bfloat16 (e.g. float32,int8)
SECTION_PREFIX=${SECTION_PREFIX:-demo-cpu}  # e.g. demo-gpu with the extra arguments --device cuda
if [ "$DRY_RUN" = 1 ]; then
  MAX_SENTENCES=${MAX_SENTENCES:-20}; WARMUP=${WARMUP:-2}
  OUT_DIR=${OUT_DIR:-$RUNS/benchmark-demo-dry}; DOC=${DOC:-$OUT_DIR/benchmarks.md}
fi
MAX_SENTENCES=${MAX_SENTENCES:-0}           # 0: the whole test set (1,000 sentences)
WARMUP=${WARMUP:-10}
OUT_DIR=${OUT_DIR:-$RUNS/benchmark-demo}
DOC=${DOC:-$REPO/docs/benchmarks.md}
need_fairseq
check_inputs "DEMO/verifier.pt=$DEMO/verifier.pt" "DEMO/drafter.pt=$DEMO/drafter.pt" \
  "DEMO/sentencepiece.model=$DEMO/sentencepiece.model"
DEMO=$(abspath "$DEMO"); OUT_DIR=$(abspath "$OUT_DIR"); DOC=$(abspath "$DOC")   # as given, before the cd below

# 1. Multi30k prepared with the demo pair's sentencepiece model and dictionaries (DRY_RUN: the first lines only)
demo_test_data "$OUT_DIR" "$TEST_SPLITS"

# 2. one harness run per test set and batch size; paths relative to the clone (they are printed in the tables)
cd "$REPO"
demo=$(relative "$DEMO")
specdec_pp=specdec++:drafter_path=$demo/drafter-beam5.pt,
if [ -z "$DECODERS" ] && [ ! -s "$DEMO/drafter-beam5.pt" ]; then
  log "no $demo/drafter-beam5.pt: no specdec++ row"; specdec_pp=""
fi
bf16=,greedy:verifier_matmul=bf16,specdec:verifier_matmul=bf16
if [ -z "$DECODERS" ] &&
  ! "$PYTHON" -c "from fairseq_plugins.decoding.linears import bfloat16_available as a; exit(not a())"; then
  log "no oneDNN bfloat16 kernels on this CPU: no --verifier-matmul bf16 rows"; bf16=""
fi
DECODERS=${DECODERS:-beam1,greedy,beam5,specdec,${specdec_pp}iad,jacobi,gs-jacobi,\
oracle,bound,drafter-only,greedy:verifier_matmul=int8,specdec:verifier_matmul=int8,iad:verifier_matmul=int8$bf16}
for split in $TEST_SPLITS; do
  name=$([ "$split" = test ] && echo "" || echo "-test2017")
  for bs in ${BATCH_SIZES//,/ }; do   # "1 32" or 1,32
    section=$SECTION_PREFIX$name-b$bs
    log "latency of $demo on $split (batch $bs, $THREADS thread(s)) -> $DOC, section $section"
    OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS "$PYTHON" -m fairseq_plugins.bench.latency \
      "$(relative "$OUT_DIR/data/bin")" --path "$demo/verifier.pt" --drafter-path "$demo/drafter.pt" \
      --source-lang en --target-lang de --gen-subset "$split" --remove-bpe sentencepiece --max-len-a 1.2 \
      --max-len-b 10 --batch-sizes "$bs" --threads "$THREADS" --warmup "$WARMUP" --max-sentences "$MAX_SENTENCES" \
      --decoders "$DECODERS" --ct2-compute-types "$CT2_COMPUTE_TYPES" --ct2-dir "$OUT_DIR/ct2" \
      --out-md "$DOC" --md-section "$section" --out-json "$OUT_DIR/$section.json" --no-progress-bar "$@" >&2
  done
done
log "done: $DOC"
echo "$DOC"
