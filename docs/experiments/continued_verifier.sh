#!/usr/bin/env bash
# Issue 12: the demo verifier stopped at 10 epochs (1,360 updates, a 1.25 h cap on one core), far from converged:
# the double-token recipe's single-token model, the same 3+3-layer architecture and settings, passes 38 valid BLEU
# after ~35 epochs. Does a verifier trained on (whole, on the references) draft better, and by how much is it better?
# Resumable (every step is skipped when its output exists), on 2 cores:
#   RUNS=/work/runs bash docs/experiments/continued_verifier.sh
# Needs $RUNS/multi30k/{spm,bin} (recipes/data/prepare-with-model.sh with the demo pair's sentencepiece model and
# dictionaries, README Results). Steps, outputs under $RUNS/v2:
#   1. the demo verifier trained on from its weights (fresh Adam, inverse-sqrt from 3.8e-4, the rate its schedule
#      had reached; bfloat16 autocast, 2 threads; valid greedy BLEU every epoch), VERIFIER_HOURS of training;
#   2. the average of its last NUM_AVG epochs, exported --fp16: V2.pt;
#   3. V2's greedy translations of the 29,000 training sources and 113,558 substituted ones (MORE_SOURCES=4),
#      two shards at a time;
#   4. the shipped drafter's decoder put on V2's encoder (docs/experiments/rebase_drafter.py), then fine-tuned on
#      V2's translations, DRAFTER_HOURS, 2 threads; its best checkpoint exported --fp16: D2.pt;
#   5. one harness run per pair (the demo pair first) on test2016.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:?set RUNS}; W=$RUNS/v2
DEMO=$RUNS/previous-demo  # the demo pair this experiment started from (replaced on 2026-12-02: frozen_encoder_student.sh)
# shellcheck source=docs/experiments/pair_steps.sh
source docs/experiments/pair_steps.sh
previous_demo_pair "$DEMO"
VERIFIER_HOURS=${VERIFIER_HOURS:-0.95}; DRAFTER_HOURS=${DRAFTER_HOURS:-0.6}; NUM_AVG=${NUM_AVG:-5}
DRAFTER_LR=${DRAFTER_LR:-1e-4}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
DECODERS=beam1,specdec,specdec:length=fixed,specdec++,specdec++:beta=5,tau=3,drafter-only,iad


# 1-2. the verifier
if [ ! -s "$W/V2.pt" ]; then
  CPU=1 THREADS=2 TASK=speculative_translation SETTING=multi30k-verifier DATA=$RUNS/multi30k/bin \
    SAVE_DIR=$W/verifier LR=3.8e-4 WARMUP=1360 WARMUP_INIT_LR=1e-4 MAX_EPOCH=30 STOP_TIME_HOURS=$VERIFIER_HOURS \
    KEEP_LAST_EPOCHS=10 EVAL_BLEU=1 LOG_INTERVAL=20 bash recipes/train-at.sh \
    --finetune-from-model $DEMO/verifier.pt --cpu-autocast bf16
  SAVE_DIR=$W/verifier NUM_AVG=$NUM_AVG OUTPUT=$W/verifier/checkpoint_avg$NUM_AVG.pt bash recipes/average-checkpoints.sh
  export_fp16 "$W/verifier/checkpoint_avg$NUM_AVG.pt" "$W/V2.pt"
fi

# 3. its greedy translations (the substituted sources: augment_sources' passes over the training sources)
text=$W/greedy/text; mkdir -p "$text"
cp -n "$RUNS/multi30k/spm/train.en" "$text/train.en"
[ -s "$text/more-4.en" ] || python -m fairseq_plugins.scripts.augment_sources "$text/train.en" "$text/more-4.en" --copies 4
distil_sources "$W/V2.pt" "$W/greedy" 1

# 4. the drafter
[ -s "$W/drafter-init.pt" ] || python docs/experiments/rebase_drafter.py $DEMO/drafter.pt "$W/V2.pt" "$W/drafter-init.pt"
[ -s "$W/drafter/checkpoint_best.pt" ] || CPU=1 THREADS=2 SETTING=multi30k-drafter VERIFIER=$W/V2.pt \
  DATA=$W/greedy/bin SAVE_DIR=$W/drafter STOP_TIME_HOURS=$DRAFTER_HOURS DROPOUT=0.0 LR=$DRAFTER_LR \
  WARMUP_INIT_LR=$DRAFTER_LR WARMUP=10000 GLANCE_START=0.3 GLANCE_END=0.3 MAX_EPOCH=1000 KEEP_LAST_EPOCHS=1 \
  SAVE_INTERVAL_UPDATES=200 bash recipes/train-drafter.sh --finetune-from-model "$W/drafter-init.pt" \
  --validate-interval-updates 200 --cpu-autocast bf16
export_fp16 "$W/drafter/checkpoint_best.pt" "$W/D2.pt"

# 5. the harness, one run per pair
bench_pair "$W" demo "$DEMO/verifier.pt" "$DEMO/drafter.pt" "$DECODERS"
bench_pair "$W" v2 "$W/V2.pt" "$W/D2.pt" "$DECODERS"
