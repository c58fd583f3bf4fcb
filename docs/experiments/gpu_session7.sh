#!/usr/bin/env bash
# Prepared for the next lent GPU machine (not run yet). gpu_session5.sh fine-tuned the demo drafter on gpu/dda3
# (404,777 distilled pairs) for 8,400 updates: valid 3.527 -> 3.625 tokens per iteration (CPU-scored), still rising
# slowly at the call's end. This call:
#   phase 1: today's demo drafter fine-tuned on gpu/dda3 with every core until END seconds (finetune_drafter of
#            gpu_prelude.sh), its best and last checkpoints back as fp16 parts in $OUT
#   phase 2, the GPU to itself: the harness as gpu_session5.sh (float32, batch 1, the first 500 test2016 sentences,
#            2 rounds, --profile) with that best checkpoint, the demo drafter beside it
# Carry .whl and gpu (gpu_prepare.sh with AUG_DATA3 packs gpu/dda3); run once with timeout_s 600, then give the
# machine back. LOCAL=1: dry check on a CPU (END=120 there).
. docs/experiments/gpu_prelude.sh
if [ "$LOCAL" = 1 ]; then END=${END:-120}; else END=${END:-400}; fi

DATA=$REPO/gpu/dda3; [ -d "$DATA" ] || DATA=$REPO/gpu/dda
finetune_drafter ft "$DATA" "$REPO/checkpoints/demo/drafter.pt" 0-14
echo "[$(el)s] fine-tune done"

NEW=$R/ft_best.pt; [ -s "$NEW" ] || NEW=checkpoints/demo/drafter.pt
harness "$NEW" beam1,specdec,specdec:drafter_path=checkpoints/demo/drafter.pt,specdec++,specdec++:beta=5,tau=3 "${HTIME:-150}"
ls -la "$OUT"; echo "[$(el)s] done"
