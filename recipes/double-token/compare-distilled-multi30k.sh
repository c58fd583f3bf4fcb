#!/usr/bin/env bash
# Double-token decoding against its single-token baseline, with and without distillation, in one command
# (issue 14): the bidirectional model and the single-token L2R model trained to convergence on Multi30k
# (recipes/double-token/train-multi30k.sh with CONVERGE=1: patience 10, the average of the 10 best
# checkpoints), the converged single-token model's beam-5 translations of the training set
# (recipes/distill.sh; the paper: distillation improves every system alike), the same pair trained to
# convergence on them, then all four side by side in one run of bench.systems (each distilled system
# against the distilled single-token model, the others against the original one) and their valid-BLEU
# curves in one plot.
#   RUNS=... AUTOCAST=bf16 bash recipes/double-token/compare-distilled-multi30k.sh
#   PARALLEL=1 ...   the two systems of each stage side by side, one CPU core each (two shards for the
#                    distillation); a stage waits for both
# Each stage is skipped when its output exists (a trained system: its training.done; the distillation: its
# binarized train split), so the same command goes on after a kill, from fairseq's checkpoint_last.pt.
# train-multi30k.sh's options (AUTOCAST, CPU, FP16, PATIENCE, ...) pass through as env vars, and extra
# fairseq-train options after the script name to every training.
#   DRY_RUN=1 DATA=<small binarized dir> RAW=<its text> SRC=src TGT=tgt REMOVE_BPE=none bash recipes/double-token/compare-distilled-multi30k.sh
set -euo pipefail
main() {
  . "$(dirname "$0")/../lib/common.sh"
  DATA=${DATA:-$RUNS/multi30k/bin}            # fairseq-preprocess output (joined dictionary), references
  RAW=${RAW:-$RUNS/multi30k/spm}              # DATA's text before binarizing (RAW/train.SRC is distilled)
  SRC=${SRC:-en}; TGT=${TGT:-de}
  ORIGINAL_ROOT=${ORIGINAL_ROOT:-$RUNS/multi30k/double-token}              # the pair on the original data
  DISTILLED=${DISTILLED:-$RUNS/multi30k/distilled-single-beam5}            # the distillation (text/, bin/)
  DISTILLED_ROOT=${DISTILLED_ROOT:-$RUNS/multi30k/double-token-distilled}  # the pair on the distillation
  OUT=${OUT:-$RUNS/multi30k/double-token-comparison}   # results.{md,png,json}, bleu-curves.png
  TEACHER_BEAM=${TEACHER_BEAM:-5}             # the single-token model's beam when it distils
  PARALLEL=${PARALLEL:-0}
  # evaluation (as train-multi30k.sh's)
  GEN_SUBSET=${GEN_SUBSET:-test}; BEAM=${BEAM:-5}; THREADS=${THREADS:-1}
  MAX_SENTENCES=${MAX_SENTENCES:-0}; BENCH_WARMUP=${BENCH_WARMUP:-10}
  MAX_LEN=${MAX_LEN:---max-len-a 1.2 --max-len-b 10}
  REMOVE_BPE=${REMOVE_BPE:-sentencepiece}
  if [ "$DRY_RUN" = 1 ]; then MAX_SENTENCES=${DRY_SENTENCES:-5}; BENCH_WARMUP=1; BEAM=2; fi
  case $PARALLEL in 0 | 1) ;; *) die "PARALLEL must be 0|1" ;; esac
  check_inputs "DATA=$DATA/dict.$SRC.txt" "RAW=$RAW/train.$SRC"
  export DATA SRC TGT REMOVE_BPE CONVERGE=1 EVALUATE=0

  log "1/4 the pair on the original data -> $ORIGINAL_ROOT"
  train_pair "$ORIGINAL_ROOT" "" "$@"
  log "2/4 the single-token model's beam-$TEACHER_BEAM distillation of the training set -> $DISTILLED"
  distil
  log "3/4 the pair on the distillation -> $DISTILLED_ROOT"
  train_pair "$DISTILLED_ROOT" "$DISTILLED/bin" "$@"
  log "4/4 the four systems side by side -> $OUT"
  compare
}

ORDERS_COMPARED=(bidirectional single_l2r)

# train_pair SAVE_ROOT TRAIN_DATA [fairseq-train options...]: both orders to convergence (in turn, or with
# PARALLEL=1 side by side, each pinned to its own core where taskset and the cores exist)
train_pair() {
  local root=$1 train_data=$2 order core=0 pids=() failed=()
  shift 2
  mkdir -p "$root"
  for order in "${ORDERS_COMPARED[@]}"; do
    if [ "$PARALLEL" = 1 ]; then
      log "$order: training in the background, its recipe's log $root/$order.recipe.log"
      SAVE_ROOT=$root TRAIN_DATA=$train_data ORDERS=$order pinned "$core" \
        bash "$REPO/recipes/double-token/train-multi30k.sh" "$@" > "$root/$order.recipe.log" 2>&1 &
      pids+=($!); core=$((core + 1))
    else
      SAVE_ROOT=$root TRAIN_DATA=$train_data ORDERS=$order bash "$REPO/recipes/double-token/train-multi30k.sh" "$@"
    fi
  done
  [ "$PARALLEL" = 1 ] || return 0
  trap 'for pid in "${pids[@]}"; do kill_tree "$pid"; done' EXIT
  for core in "${!pids[@]}"; do
    wait "${pids[$core]}" || failed+=("${ORDERS_COMPARED[$core]} (see $root/${ORDERS_COMPARED[$core]}.recipe.log)")
  done
  trap - EXIT
  [ ${#failed[@]} = 0 ] || die "training failed: ${failed[*]}"
}

# pinned CORE COMMAND...: COMMAND on CPU core CORE where taskset exists and the machine has that core
pinned() {
  local core=$1; shift
  if command -v taskset > /dev/null && [ "$core" -lt "$(nproc)" ]; then taskset -c "$core" "$@"; else "$@"; fi
}

# distil: DISTILLED/bin = DATA with the training targets replaced by the converged single-token model's
# translations (valid and test keep their references)
distil() {
  local teacher=$ORIGINAL_ROOT/single_l2r/checkpoint_avg_best.pt
  if all_exist "$DISTILLED/bin/train.$SRC-$TGT.$TGT.bin"; then log "distilled already ($DISTILLED/bin)"; return; fi
  check_inputs "TEACHER=$teacher"
  TEACHER=$teacher TEACHER_DATA=$DATA VERIFIER_DATA=$DATA RAW=$RAW OUT=$DISTILLED BEAM=$TEACHER_BEAM DISTILL_VALID=0 \
    NUM_SHARDS=${NUM_SHARDS:-$((PARALLEL + 1))} DEVICE=${DEVICE:-auto} bash "$REPO/recipes/distill.sh"
}

# compare: the four averaged systems in one bench.systems run, and the four valid-BLEU curves
compare() {
  local kind order args=() logs=() labels=()
  mkdir -p "$OUT"
  for kind in original distilled; do
    for order in single_l2r bidirectional; do
      local root=$ORIGINAL_ROOT name=$order
      if [ "$kind" = distilled ]; then root=$DISTILLED_ROOT; name=${order}_distilled; fi
      args+=(--system "$name=$root/$order/checkpoint_avg_best.pt")
      logs+=("$root/$order/train.log"); labels+=(--label "$order, $kind data")
    done
  done
  args+=(--baseline single_l2r --baseline-of bidirectional_distilled=single_l2r_distilled
         --beams "1,$BEAM" --gen-subset "$GEN_SUBSET" --max-sentences "$MAX_SENTENCES" --warmup "$BENCH_WARMUP"
         --threads "$THREADS" --source-lang "$SRC" --target-lang "$TGT"
         --out-md "$OUT/results.md" --out-png "$OUT/results.png" --out-json "$OUT/results.json")
  if [ "$REMOVE_BPE" != none ]; then args+=(--remove-bpe "$REMOVE_BPE"); fi
  # shellcheck disable=SC2086  # MAX_LEN is a list of options
  "$PYTHON" -m fairseq_plugins.bench.systems "$DATA" "${args[@]}" $MAX_LEN >&2
  "$PYTHON" -m fairseq_plugins.scripts.plot_validation "${logs[@]}" "${labels[@]}" --metric bleu \
    --title "valid BLEU (greedy) per epoch: original vs distilled data" --out "$OUT/bleu-curves.png" >&2
  log "done: $OUT/results.md, $OUT/bleu-curves.png"
}

main "$@"
exit
