#!/usr/bin/env bash
# Prepared for the next lent GPU machine (not run on one yet). Issue 12: a deeper drafter. Cutting the drafter to one
# decoder layer cost 17 % of its tokens per iteration (3.05 against 3.67); docs/experiments/feature_drafter.py's
# `grown` arm (2026-12-02, sixth) put the verifier's third decoder layer on the shipped drafter and fine-tuned it on
# the CPU beside the 2-layer control: 3.991 valid tokens per iteration against the control's 3.949 after 1,875 updates
# (the shipped drafter 3.971), still rising. This call trains that 3-layer drafter with the GPU and every core:
#   phase 1: docs/experiments/drafter_layers.py grow (the shipped drafter + the shipped verifier's third decoder layer)
#   phase 2: it fine-tuned (finetune_drafter of gpu_prelude.sh, DEC_LAYERS=3) on gpu/dda3, the shipped verifier's
#            greedy translations of 404,777 sources, until END seconds; its best and last checkpoints as fp16 parts
# Prepared here by `AUG_DATA3=$RUNS/v5/greedy/bin bash docs/experiments/gpu_prepare.sh`; carry .whl and gpu; run once
# with timeout_s 600, then give the machine back. Score the parts here with drafter_weight_average.py (TEMPLATE: a
# grown checkpoint). LOCAL=1: dry check on a CPU (END=150 there: the chain up to the fine-tune's first updates, checked
# 2026-12-02; the CPU saves no checkpoint that soon, so the export reports none).
. docs/experiments/gpu_prelude.sh
if [ "$LOCAL" = 1 ]; then END=${END:-150}; else END=${END:-480}; fi
python docs/experiments/drafter_layers.py grow checkpoints/demo/drafter.pt "$R/grown.pt" checkpoints/demo/verifier.pt
[ -d "$REPO/gpu/dda3" ] || { echo "no gpu/dda3 (gpu_prepare.sh with AUG_DATA3)"; exit 1; }
DEC_LAYERS=3 finetune_drafter grown "$REPO/gpu/dda3" "$R/grown.pt" 0-15
ls -la "$OUT"; echo "[$(el)s] done"
