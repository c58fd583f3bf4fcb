#!/usr/bin/env bash
# Run in the session of 2026-11-27 (fifth): docs/results.md, GPU (H200). The 2026-11-27 session showed on an H200 that the demo drafter
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

harness checkpoints/demo/drafter.pt beam1,specdec,specdec:length=fixed,specdec++,specdec++:beta=5,tau=3 "${HTIME:-200}"

DATA=$REPO/gpu/dda3; [ -d "$DATA" ] || DATA=$REPO/gpu/dda
if [ -d "$DATA" ]; then
  finetune_drafter ft "$DATA" "$REPO/checkpoints/demo/drafter.pt" 0-14
else
  echo "no gpu/dda3 and no gpu/dda (gpu_prepare.sh AUG_DATA=...): no training"
fi
(cd "$R" && tar czf "$OUT/logs.tgz" --ignore-failed-read install.log harness.* ft.out 2>/dev/null)
ls -la "$OUT"; echo "[$(el)s] done"
