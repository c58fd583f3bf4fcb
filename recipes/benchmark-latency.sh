#!/usr/bin/env bash
# Latency of every decoder side by side (fairseq greedy and beam-5, the plugin's greedy on its lean verifier,
# SpecDec, SpecDec++, IAD, Jacobi family, drafter alone; CTranslate2 greedy/beam-5 per compute type when the package
# is installed): batch 1 by default, one device, fixed CPU threads; median/p90 latency, speedups vs beam1, greedy and
# beam-5, tokens per iteration, BLEU, outputs != beam1 and != greedy, each row's arithmetic.
#   CHECKPOINT=.../checkpoint_avg10.pt DATA=$RUNS/wmt14-ende/bin DRAFTER=.../drafter.pt bash recipes/benchmark-latency.sh
#   SETTING=wmt14-ende-verifier DRAFTER=... DEVICE=cuda FP16=1 BATCH_SIZES=1,8,32 bash recipes/benchmark-latency.sh
# Without DRAFTER the drafter rows (specdec, specdec++, drafter-only) are skipped with a message.
# Writes OUT_PREFIX.md (table + hardware; with MD_SECTION=NAME the table goes into that section of DOC instead),
# OUT_PREFIX.png, OUT_PREFIX.json; extra arguments go to the harness (python -m fairseq_plugins.bench.latency
# --help), e.g. --max-len-b 200 --lenpen 0.6.
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"
need_fairseq
SETTING=${SETTING:-}
load_setting
DATA=${DATA:?set DATA or SETTING}
SRC=${SRC:-en}; TGT=${TGT:-de}
SAVE_DIR=${SAVE_DIR:-$(dirname "$DATA")/checkpoints/at-$SRC$TGT}
CHECKPOINT=${CHECKPOINT:-$SAVE_DIR/checkpoint_avg${KEEP_LAST_EPOCHS:-10}.pt}   # average-checkpoints.sh's
DRAFTER=${DRAFTER:-}                      # block NAT drafter checkpoint (SpecDec rows)
DECODERS=${DECODERS:-}                  # empty: the harness default (every registered decoder); add oracle,bound
SUBSET=${SUBSET:-test}
DEVICE=${DEVICE:-cpu}                     # cpu | cuda
FP16=${FP16:-0}                           # 1: half precision (cuda only)
THREADS=${THREADS:-1}                     # CPU threads (torch and CTranslate2)
WARMUP=${WARMUP:-10}                      # untimed sentences per decoder
MAX_SENTENCES=${MAX_SENTENCES:-0}         # 0: the whole split
BATCH_SIZES=${BATCH_SIZES:-1}             # 1: the paper's latency setting; e.g. 1,8,32 (or "1 8 32") for a sweep
BATCH_SIZES=${BATCH_SIZES// /,}
REMOVE_BPE=${REMOVE_BPE:-${EVAL_BPE:-sentencepiece}}   # subword_nmt | sentencepiece | none (default: as generate.sh)
CT2=${CT2:-1}                             # 0: no CTranslate2 rows
CT2_COMPUTE_TYPES=${CT2_COMPUTE_TYPES:-auto}  # e.g. float32,int8 (auto: those of float32/int8/int16/bfloat16 supported)
MD_SECTION=${MD_SECTION:-}                # e.g. wmt14-cpu-b1: the table into DOC's <!-- bench:NAME --> section
DOC=${DOC:-$REPO/docs/benchmarks.md}
PROFILE=${PROFILE:-0}                     # 1: --profile (per-iteration cost split, needs beam1)
DRY_ARGS=()
if [ "$DRY_RUN" = 1 ]; then
  DEVICE=cpu; FP16=0; WARMUP=1; MAX_SENTENCES=${DRY_SENTENCES:-5}; DRY_ARGS=(--max-len-a 1 --max-len-b 5)
fi
PRECISION=fp32; if [ "$FP16" = 1 ]; then PRECISION=fp16; fi
OUT_DIR=${OUT_DIR:-$(dirname "$CHECKPOINT")/latency}
OUT_PREFIX=${OUT_PREFIX:-$OUT_DIR/latency-$SUBSET-$DEVICE-$PRECISION-batch${BATCH_SIZES//,/_}}
export OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS

args=("$DATA" --path "$CHECKPOINT" --source-lang "$SRC" --target-lang "$TGT" --gen-subset "$SUBSET"
      --device "$DEVICE" --threads "$THREADS" --warmup "$WARMUP"
      --max-sentences "$MAX_SENTENCES" --batch-sizes "$BATCH_SIZES" --remove-bpe "$REMOVE_BPE"
      --ct2-compute-types "$CT2_COMPUTE_TYPES" --out-png "$OUT_PREFIX.png" --out-json "$OUT_PREFIX.json")
if [ -n "$MD_SECTION" ]; then args+=(--out-md "$DOC" --md-section "$MD_SECTION"); else args+=(--out-md "$OUT_PREFIX.md"); fi
if [ -n "$DECODERS" ]; then args+=(--decoders "$DECODERS"); fi
if [ -n "$DRAFTER" ]; then args+=(--drafter-path "$DRAFTER"); fi
if [ "$PROFILE" = 1 ]; then args+=(--profile); fi
if [ "$FP16" = 1 ]; then args+=(--fp16); fi
if [ "$CT2" != 1 ]; then args+=(--no-ctranslate2); fi
mkdir -p "$(dirname "$OUT_PREFIX")"
log "latency of ${DECODERS:-every registered decoder} on $SUBSET ($DEVICE, $THREADS threads, batch $BATCH_SIZES) -> $OUT_PREFIX.{md,png,json}"
"$PYTHON" -m fairseq_plugins.bench.latency "${args[@]}" "${DRY_ARGS[@]}" "$@" >&2   # prints the table too
if [ -n "$MD_SECTION" ]; then echo "$DOC"; else echo "$OUT_PREFIX.md"; fi
