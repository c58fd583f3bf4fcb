#!/usr/bin/env bash
# Prepared for the next lent GPU machine (not run yet). The 2026-11-27 session showed on an H200 that the demo drafter
# rises when fine-tuned on more distilled sources (gpu/dda: 3.384 -> 3.527 valid tokens per iteration in ~7 minutes
# over two calls, shipped) and falls on the first distillation alone. This call:
#   phase 1, the GPU to itself: the harness as gpu_session3.sh (float32, batch 1, the first 500 test2016 sentences,
#            2 rounds, --profile) with today's demo drafter, default SpecDec, fixed length, SpecDec++ (both presets)
#   phase 2: the demo drafter fine-tuned on gpu/dda3 when carried (gpu_prepare.sh AUG_DATA=<a bin with more
#            sources>; else gpu/dda) with every core until END seconds, validating every 350 updates
#   phase 3: its best and its last checkpoint as fp16 parts in $OUT (average them on the CPU:
#            docs/experiments/drafter_weight_average.py scores single checkpoints and averages), the logs
# Carry .whl and gpu; run once with timeout_s 600, then give the machine back. LOCAL=1: dry check on a CPU.
END=${END:-520}
. docs/experiments/gpu_prelude.sh
if [ "$LOCAL" = 1 ]; then SENTENCES=20; else SENTENCES=${SENTENCES:-500}; fi

pin 15 timeout ${HTIME:-200} python -m fairseq_plugins.bench.latency "$REPO/gpu/bin" --path checkpoints/demo/verifier.pt \
  --drafter-path checkpoints/demo/drafter.pt --source-lang en --target-lang de --remove-bpe sentencepiece \
  --max-len-a 1.2 --max-len-b 10 --threads 1 --device "$DEV" --no-ctranslate2 --no-progress-bar --profile \
  --max-sentences "$SENTENCES" --rounds 2 --warmup 10 \
  --decoders beam1,specdec,specdec:length=fixed,specdec++,specdec++:beta=5,tau=3 \
  --out-md "$OUT/harness.md" --out-json "$R/harness.json" > "$R/harness.log" 2>&1; echo "harness rc $?"
grep '^|' "$OUT/harness.md" 2>/dev/null
echo "[$(el)s] harness done"

DATA=$REPO/gpu/dda3; [ -d "$DATA" ] || DATA=$REPO/gpu/dda
if [ -d "$DATA" ]; then
  STOP=$(python -c "print(round(max(60, $END - $(el)) / 3600, 4))")
  export RUNS=$R
  CPU=$CPU FP16=0 SETTING=multi30k-drafter VERIFIER=$REPO/checkpoints/demo/verifier.pt DATA=$DATA \
    SAVE_DIR=$R/ft DROPOUT=0.1 LR=1.0e-4 WARMUP_INIT_LR=1.3e-4 WARMUP=6000 GLANCE_START=0.3 GLANCE_END=0.3 \
    MAX_EPOCH=1000 STOP_TIME_HOURS=$STOP KEEP_LAST_EPOCHS=1 pin 0-14 bash recipes/train-drafter.sh \
    --finetune-from-model "$REPO/checkpoints/demo/drafter.pt" --validate-interval 1000 --save-interval 1000 \
    --validate-interval-updates 350 --save-interval-updates 350 --keep-interval-updates 1 > "$R/ft.out" 2>&1 &
  TRAIN_PID=$!
  while [ "$(el)" -lt "$END" ] && kill -0 $TRAIN_PID 2>/dev/null; do sleep 5; done
  pkill -f -- "--save-dir $R/"; wait $TRAIN_PID
  echo "fine-tune on $DATA:"
  grep "valid on" "$R/ft.out" | sed -E 's/.*spec_tokens_per_iter ([0-9.]+).*num_updates ([0-9]+).*/\2:\1/' | tr '\n' ' '; echo
  for which in best last; do
    python -m fairseq_plugins.scripts.export_checkpoint "$R/ft/checkpoint_$which.pt" "$R/ft_$which.pt" --fp16 \
      && split -b 15M "$R/ft_$which.pt" "$OUT/drafter_ft_$which.pt.part-"
  done
else
  echo "no gpu/dda3 and no gpu/dda (gpu_prepare.sh AUG_DATA=...): no training"
fi
(cd "$R" && tar czf "$OUT/logs.tgz" --ignore-failed-read install.log harness.* ft.out 2>/dev/null)
ls -la "$OUT"; echo "[$(el)s] done"
