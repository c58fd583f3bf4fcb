#!/usr/bin/env bash
# Double-token decoding against its single-token baseline, with and without distillation, in one command:
# the bidirectional model and the single-token L2R model trained to convergence on Multi30k
# (recipes/double-token/train-multi30k.sh with CONVERGE=1: patience 10, the average of the 10 best
# checkpoints), the converged single-token model's beam-5 translations of the training set
# (recipes/distill.sh; the paper: distillation improves every system alike), the same pair trained to
# convergence on them, then all four side by side in one run of bench.systems (each distilled system
# against the distilled single-token model, the others against the original one) and their valid-BLEU
# curves in one plot.
#   RUNS=... AUTOCAST=bf16 bash recipes/double-token/compare-distilled-multi30k.sh
#   TEACHER=checkpoints/demo/verifier.pt ...   the distillation is this model's (e.g. the SpecDec
#                    verifier; it must share DATA's dictionaries), made first: the distilled pair (DISTILLED_ROOT
#                    and OUT are named after the teacher) trains before the original pair, which no longer gates
#                    it. The demo verifier is a weak teacher (test2016 greedy 29.7 BLEU against the converged
#                    single-token model's ~38): its students learn a worse target, so the default stays the
#                    single-token model
#   PARALLEL=1 ...   two pipelines side by side, one CPU core each: the single-token model trains, distils and
#                    trains on its distillation; the bidirectional model trains, waits for the distillation,
#                    trains on it
#   WARM_START=1 ...   a fifth system: the bidirectional model on the distillation started from the converged
#                    single-token model on it (--finetune-from-model its checkpoint_avg_best.pt: same architecture,
#                    only the decoding order differs; a fresh optimiser and learning-rate schedule), trained after
#                    both pipelines to convergence with patience WARM_PATIENCE (default PATIENCE), in DISTILLED_ROOT-warm
#   PAIR_ONLY=1 ...  only what the shipped pair needs (recipes/double-token/ship.sh), in turn: the single-token model
#                    (the teacher), its distillation, the single-token model on it, the bidirectional model started
#                    from that one (WARM_START); no bidirectional model from scratch, no comparison
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
  TEACHER=${TEACHER:-}                        # empty: the converged single-token model; else a checkpoint
  TEACHER_BEAM=${TEACHER_BEAM:-5}             # the teacher's beam when it distils
  DISTILLED=${DISTILLED:-$RUNS/multi30k/distilled-$(teacher_name)-beam$TEACHER_BEAM}   # the distillation (text/, bin/)
  DISTILLED_ROOT=${DISTILLED_ROOT:-$RUNS/multi30k/double-token-distilled$(teacher_suffix)}  # the pair on it
  OUT=${OUT:-$RUNS/multi30k/double-token-comparison$(teacher_suffix)}   # results.{md,png,json}, bleu-curves.png
  PARALLEL=${PARALLEL:-0}
  WARM_START=${WARM_START:-0}
  PAIR_ONLY=${PAIR_ONLY:-0}
  WARM_ROOT=$DISTILLED_ROOT-warm              # the bidirectional model started from the single-token one on it
  # evaluation (as train-multi30k.sh's)
  GEN_SUBSET=${GEN_SUBSET:-test}; BEAM=${BEAM:-5}; THREADS=${THREADS:-1}
  MAX_SENTENCES=${MAX_SENTENCES:-0}; BENCH_WARMUP=${BENCH_WARMUP:-10}
  MAX_LEN=${MAX_LEN:---max-len-a 1.2 --max-len-b 10}
  REMOVE_BPE=${REMOVE_BPE:-sentencepiece}
  if [ "$DRY_RUN" = 1 ]; then MAX_SENTENCES=${DRY_SENTENCES:-5}; BENCH_WARMUP=1; BEAM=2; fi
  case $PARALLEL in 0 | 1) ;; *) die "PARALLEL must be 0|1" ;; esac
  case $WARM_START in 0 | 1) ;; *) die "WARM_START must be 0|1" ;; esac
  case $PAIR_ONLY in 0) ;; 1) WARM_START=1 ;; *) die "PAIR_ONLY must be 0|1" ;; esac
  check_inputs "DATA=$DATA/dict.$SRC.txt" "RAW=$RAW/train.$SRC"
  if [ -n "$TEACHER" ]; then check_inputs "TEACHER=$TEACHER"; fi
  export DATA SRC TGT REMOVE_BPE CONVERGE=1 EVALUATE=0

  if [ "$PAIR_ONLY" = 1 ]; then
    train_pair "$@"
    log "done: $DISTILLED_ROOT/single_l2r and $WARM_ROOT/bidirectional (recipes/double-token/ship.sh)"
    return
  fi
  mkdir -p "$OUT"
  if [ "$PARALLEL" = 1 ]; then
    train_side_by_side "$@"
  else
    local kind order
    for kind in $(data_order); do
      if [ "$kind" = distilled ]; then distil; fi
      for order in bidirectional single_l2r; do train_order "$kind" "$order" "$@"; done
    done
  fi
  if [ "$WARM_START" = 1 ]; then train_warm_start "$@"; fi
  log "the systems side by side -> $OUT"
  compare
}

# teacher_name: what DISTILLED's default is named after: single (the converged single-token model) or TEACHER's file
# name without .pt
teacher_name() { if [ -z "$TEACHER" ]; then echo single; else basename "$TEACHER" .pt; fi; }
# teacher_suffix: DISTILLED_ROOT's and OUT's defaults after the teacher: none for the single-token model, else
# -NAME-beamB
teacher_suffix() { if [ -n "$TEACHER" ]; then echo "-$(teacher_name)-beam$TEACHER_BEAM"; fi; }

# data_order: the data the systems train on, in order: the original data first (its single-token model is the
# teacher), or with a TEACHER its distillation first
data_order() { if [ -z "$TEACHER" ]; then echo original distilled; else echo distilled original; fi; }

# save_root original|distilled: where the systems trained on that data live
save_root() { if [ "$1" = original ]; then echo "$ORIGINAL_ROOT"; else echo "$DISTILLED_ROOT"; fi; }

# train_order original|distilled ORDER [fairseq-train options...]: ORDER to convergence on that data
train_order() {
  local kind=$1 order=$2 root train_data=""; shift 2
  root=$(save_root "$kind")
  if [ "$kind" = distilled ]; then train_data=$DISTILLED/bin; fi
  log "$order on the $kind data -> $root/$order"
  SAVE_ROOT=$root TRAIN_DATA=$train_data ORDERS=$order bash "$REPO/recipes/double-token/train-multi30k.sh" "$@"
}

# train_pair [fairseq-train options...]: the single-token model on the original data (unless a TEACHER distils), the
# distillation, the single-token model on it, the bidirectional model started from that one
train_pair() {
  if [ -z "$TEACHER" ]; then train_order original single_l2r "$@"; fi
  distil
  train_order distilled single_l2r "$@"
  train_warm_start "$@"
}
# train_warm_start [fairseq-train options...]: the bidirectional model on the distillation, started from the
# converged single-token model on it, to convergence in WARM_ROOT/bidirectional
train_warm_start() {
  local start=$DISTILLED_ROOT/single_l2r/checkpoint_avg_best.pt
  check_inputs "the single-token model on the distillation=$start"
  log "bidirectional on the distilled data, started from $start -> $WARM_ROOT/bidirectional"
  SAVE_ROOT=$WARM_ROOT TRAIN_DATA=$DISTILLED/bin ORDERS=bidirectional \
    PATIENCE=${WARM_PATIENCE:-${PATIENCE:-}} bash "$REPO/recipes/double-token/train-multi30k.sh" \
    --finetune-from-model "$start" "$@"
}

# train_side_by_side [fairseq-train options...]: one pipeline per core, logs OUT/pipeline-ORDER.log: the
# single-token model trains, distils and trains on its distillation; the bidirectional model trains, waits for
# the distillation, and trains on it. With a TEACHER, each pipeline trains on the distillation first (the
# single-token one makes it) and on the original data after.
train_side_by_side() {
  local single bidirectional failed=()
  log "single_l2r and bidirectional side by side, logs $OUT/pipeline-{single_l2r,bidirectional}.log"
  ( pin 1; train_pipeline single_l2r distil "$@" ) > "$OUT/pipeline-single_l2r.log" 2>&1 &
  single=$!
  ( pin 0; train_pipeline bidirectional "wait_for_distillation $single" "$@" ) > "$OUT/pipeline-bidirectional.log" 2>&1 &
  bidirectional=$!
  trap 'kill_tree $single; kill_tree $bidirectional' EXIT
  wait "$single" || failed+=("single_l2r (see $OUT/pipeline-single_l2r.log)")
  wait "$bidirectional" || failed+=("bidirectional (see $OUT/pipeline-bidirectional.log)")
  trap - EXIT
  [ ${#failed[@]} = 0 ] || die "failed: ${failed[*]}"
}

# train_pipeline ORDER READY [fairseq-train options...]: ORDER on each data of data_order, the command READY (the
# distillation, or a wait for it) run before the distilled data
train_pipeline() {
  local order=$1 ready=$2 kind; shift 2
  for kind in $(data_order); do
    if [ "$kind" = distilled ]; then $ready; fi
    train_order "$kind" "$order" "$@"
  done
}

# pin CORE: this (sub)shell and what it starts on CPU core CORE, where taskset exists and the machine has it
# (nproc --all: plain nproc counts OMP_NUM_THREADS, which common.sh sets to 1)
pin() {
  if command -v taskset > /dev/null && [ "$1" -lt "$(nproc --all)" ]; then taskset -p -c "$1" "$BASHPID" > /dev/null; fi
}

# wait_for_distillation PID: until the distillation exists; fails once PID (the pipeline making it) has ended
wait_for_distillation() {
  log "waiting for the distillation ($DISTILLED/bin)"
  until distilled; do
    kill -0 "$1" 2> /dev/null || distilled || die "the single-token pipeline ended without a distillation"
    sleep "${POLL_SECONDS:-30}"
  done
}

distilled() { all_exist "$DISTILLED/bin/train.$SRC-$TGT.$TGT.bin"; }

# distil: DISTILLED/bin = DATA with the training targets replaced by the TEACHER's (default: the converged
# single-token model's) translations (valid and test keep their references)
distil() {
  local teacher=${TEACHER:-$ORIGINAL_ROOT/single_l2r/checkpoint_avg_best.pt}
  if distilled; then log "distilled already ($DISTILLED/bin)"; return; fi
  check_inputs "TEACHER=$teacher"
  TEACHER=$teacher TEACHER_DATA=$DATA VERIFIER_DATA=$DATA RAW=$RAW OUT=$DISTILLED BEAM=$TEACHER_BEAM DISTILL_VALID=0 \
    NUM_SHARDS=${NUM_SHARDS:-1} DEVICE=${DEVICE:-auto} bash "$REPO/recipes/distill.sh"
}

# compare: the four averaged systems (five with WARM_START) in one bench.systems run, and their valid-BLEU curves
compare() {
  local kind order root name args=() logs=() labels=()
  for kind in original distilled; do
    root=$(save_root "$kind")
    for order in single_l2r bidirectional; do
      name=$order; if [ "$kind" = distilled ]; then name=${order}_distilled; fi
      args+=(--system "$name=$root/$order/checkpoint_avg_best.pt")
      logs+=("$root/$order/train.log"); labels+=(--label "$order, $kind data")
    done
  done
  args+=(--baseline single_l2r --baseline-of bidirectional_distilled=single_l2r_distilled)
  if [ "$WARM_START" = 1 ]; then
    args+=(--system "bidirectional_warm=$WARM_ROOT/bidirectional/checkpoint_avg_best.pt"
           --baseline-of bidirectional_warm=single_l2r_distilled)
    logs+=("$WARM_ROOT/bidirectional/train.log"); labels+=(--label "bidirectional, distilled data, warm start")
  fi
  args+=(--beams "1,$BEAM" --gen-subset "$GEN_SUBSET" --max-sentences "$MAX_SENTENCES" --warmup "$BENCH_WARMUP"
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
