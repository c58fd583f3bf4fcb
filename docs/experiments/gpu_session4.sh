#!/usr/bin/env bash
# The 2026-11-27 session's second device call (what was left of its 15 minutes): gpu_session3.sh's phase 2 showed
# the demo drafter fine-tuned on all 197,263 distilled sources (gpu/dda) rising for its whole ~4 minutes (valid
# spec_tokens_per_iter 3.41 -> 3.51 over 4,631 updates) while the first distillation alone (gpu/dd) fell (3.34 ->
# 3.31). This call goes on from that checkpoint (FROM; the caller put it at checkpoints/demo/drafter.pt in its
# working tree for the call, as the carry limit has no room for a second drafter) on gpu/dda until END seconds,
# validating every 350 updates, and returns the best as fp16 in parts. Carry .whl and gpu (gpu/dda as dda.tar.xz).
END=${END:-230}
. docs/experiments/gpu_prelude.sh
FROM=${FROM:-$REPO/checkpoints/demo/drafter.pt}
STOP=$(python -c "print(round(max(60, $END - $(el)) / 3600, 4))")
export RUNS=$R
CPU=$CPU FP16=0 SETTING=multi30k-drafter VERIFIER=$REPO/checkpoints/demo/verifier.pt DATA=$REPO/gpu/dda \
  SAVE_DIR=$R/dda2 DROPOUT=0.1 LR=1.0e-4 WARMUP_INIT_LR=1.3e-4 WARMUP=6000 GLANCE_START=0.3 GLANCE_END=0.3 \
  MAX_EPOCH=1000 STOP_TIME_HOURS=$STOP KEEP_LAST_EPOCHS=1 pin 0-14 bash recipes/train-drafter.sh \
  --finetune-from-model "$FROM" --validate-interval 1000 --save-interval 1000 \
  --validate-interval-updates 350 --save-interval-updates 350 --keep-interval-updates 1 > "$R/dda2.out" 2>&1 &
TRAIN_PID=$!
while [ "$(el)" -lt "$END" ] && kill -0 $TRAIN_PID 2>/dev/null; do sleep 5; done
pkill -f -- "--save-dir $R/"; wait $TRAIN_PID
grep "valid on" "$R/dda2.out" | sed -E 's/.*spec_tokens_per_iter ([0-9.]+).*num_updates ([0-9]+).*/\2:\1/' | tr '\n' ' '; echo
python -m fairseq_plugins.scripts.export_checkpoint "$R/dda2/checkpoint_best.pt" "$R/dda2.pt" --fp16 \
  && split -b 15M "$R/dda2.pt" "$OUT/drafter_dda2.pt.part-"
cp "$R/dda2.out" "$OUT/"; ls -la "$OUT"; echo "[$(el)s] done"
