#!/usr/bin/env bash
# The shipped double-token pair (checkpoints/double-token: single_l2r.pt and bidirectional.pt, made by
# recipes/double-token/ship.sh) side by side on Multi30k test2016 at batch 1, one thread, beam 1 and 5: BLEU, output
# tokens per second and the speed against the single-token model (python -m fairseq_plugins.bench.systems). The
# table replaces its section of DOC (<!-- bench:double-token-cpu -->), nothing else.
#   bash recipes/double-token/benchmark.sh                     # test2016: section double-token-cpu
#   TEST_SPLITS="test test1" bash recipes/double-token/benchmark.sh   # + double-token-cpu-test2017
#   DRY_RUN=1 bash recipes/double-token/benchmark.sh           # quick: the first 20 sentences, into OUT_DIR/double-token.md
# The test sets are prepared with the demo pair's sentencepiece model and dictionaries, which the pair shares
# (recipes/lib/demo_data.sh: MULTI30K_DIR, else downloaded). Extra arguments go to bench.systems.
set -euo pipefail
. "$(dirname "$0")/../lib/common.sh"
. "$REPO/recipes/lib/demo_data.sh"          # DEMO, MULTI30K_DIR, MULTI30K_URL, demo_test_data
PAIR=${PAIR:-$REPO/checkpoints/double-token}
TEST_SPLITS=${TEST_SPLITS:-test}            # test = test2016, test1 = test2017
BEAMS=${BEAMS:-1,5}
THREADS=${THREADS:-1}
SECTION_PREFIX=${SECTION_PREFIX:-double-token-cpu}
if [ "$DRY_RUN" = 1 ]; then
  MAX_SENTENCES=${MAX_SENTENCES:-20}; WARMUP=${WARMUP:-2}; ROUNDS=${ROUNDS:-1}
  OUT_DIR=${OUT_DIR:-$RUNS/benchmark-double-token-dry}; DOC=${DOC:-$OUT_DIR/double-token.md}
fi
MAX_SENTENCES=${MAX_SENTENCES:-0}           # 0: the whole test set (1,000 sentences)
WARMUP=${WARMUP:-10}
ROUNDS=${ROUNDS:-10}                        # the rows take turns (bench.systems --rounds)
OUT_DIR=${OUT_DIR:-$RUNS/benchmark-double-token}
DOC=${DOC:-$REPO/docs/double-token.md}
need_fairseq
all_exist "$PAIR/single_l2r.pt" "$PAIR/bidirectional.pt" || die "no double-token pair in PAIR=$PAIR (single_l2r.pt," \
  "bidirectional.pt): train it (PAIR_ONLY=1 bash recipes/double-token/compare-distilled-multi30k.sh) and ship it" \
  "(bash recipes/double-token/ship.sh), or set PAIR"
check_inputs "DEMO/sentencepiece.model=$DEMO/sentencepiece.model"

# 1. Multi30k prepared with the demo pair's sentencepiece model and dictionaries (DRY_RUN: the first lines only)
demo_test_data "$OUT_DIR" "$TEST_SPLITS"

# 2. one bench.systems run per test set; paths relative to the clone (they are printed in the tables)
cd "$REPO"
pair=$(relative "$PAIR")
for split in $TEST_SPLITS; do
  section=$SECTION_PREFIX$([ "$split" = test ] && echo "" || echo "-test2017")
  log "the double-token pair on $split (batch 1, beams $BEAMS, $THREADS thread(s)) -> $DOC, section $section"
  OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS "$PYTHON" -m fairseq_plugins.bench.systems \
    "$(relative "$OUT_DIR/data/bin")" --system "single_l2r=$pair/single_l2r.pt" \
    --system "bidirectional=$pair/bidirectional.pt" --baseline single_l2r --beams "$BEAMS" --gen-subset "$split" \
    --source-lang en --target-lang de --remove-bpe sentencepiece --max-len-a 1.2 --max-len-b 10 \
    --threads "$THREADS" --warmup "$WARMUP" --rounds "$ROUNDS" --max-sentences "$MAX_SENTENCES" \
    --out-md "$DOC" --md-section "$section" --out-json "$OUT_DIR/$section.json" --no-progress-bar "$@" >&2
done
log "done: $DOC"
echo "$DOC"
