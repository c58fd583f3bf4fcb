#!/usr/bin/env bash
# The harness of gpu_session5.sh (float32, batch 1, the first 500 test2016 sentences, 2 rounds, --profile) with the
# drafter fine-tuned in that call (checkpoints/demo/drafter.pt from 2026-11-27 15:30 on), the GPU to itself, and no
# training: one short call for the few device minutes left. Carry .whl and gpu/bin; LOCAL=1: dry check on a CPU.
. docs/experiments/gpu_prelude.sh
if [ "$LOCAL" = 1 ]; then SENTENCES=20; else SENTENCES=${SENTENCES:-500}; fi

pin 15 timeout ${HTIME:-175} python -m fairseq_plugins.bench.latency "$REPO/gpu/bin" --path checkpoints/demo/verifier.pt \
  --drafter-path checkpoints/demo/drafter.pt --source-lang en --target-lang de --remove-bpe sentencepiece \
  --max-len-a 1.2 --max-len-b 10 --threads 1 --device "$DEV" --no-ctranslate2 --no-progress-bar --profile \
  --max-sentences "$SENTENCES" --rounds 2 --warmup 10 \
  --decoders beam1,specdec,specdec++,specdec++:beta=5,tau=3 \
  --out-md "$OUT/harness.md" --out-json "$OUT/harness.json" > "$R/harness.log" 2>&1; echo "harness rc $?"
grep '^|' "$OUT/harness.md" 2>/dev/null || tail -20 "$R/harness.log"
echo "[$(el)s] done"
