#!/usr/bin/env bash
# One call on a lent GPU machine (no network, the image's Python 3.12 + CUDA torch), as run for the README's
# H200 section: install, the whole test suite with CUDA visible, the latency harness on the GPU, and three
# trainings beside the tests; writes only under $OUT. Prepared on this machine, in the repo root:
#   .whl/  wheels the image lacks (cp312): hydra-core 1.0.7, omegaconf 2.0.6, antlr4-python3-runtime 4.8 (built
#          with pip wheel), bitarray, cffi, pycparser, subword-nmt, mock, sacremoses, pip 24.0, and the
#          fairseq-0.12.2.tar.gz sdist;   gpu/bin, gpu/distilled: $RUNS/multi30k/bin and $RUNS/multi30k/distilled/bin
# (both ignored through .git/info/exclude and carried), then: bash docs/experiments/gpu_session.sh
#   phase 0: install (carried wheels, the README's install.sh)
#   phase 1: full test suite with CUDA visible (cores 0-9)  ||  GPU latency harness, batch 1 (core 15)
#   phase 2: GPU trainings beside the tests: double-token bidirectional + single_l2r (CONVERGE=1), drafter continuation
#   phase 3: exports (fp16) and logs into $OUT
# LOCAL=1: a dry check of the script's logic on a CPU machine (no install, tiny runs).
END=${END:-505}         # seconds after start by which phase 3 begins
. docs/experiments/gpu_prelude.sh
if [ "$LOCAL" = 1 ]; then
  PARALLEL=""; TESTS="tests/test_cuda.py tests/test_spec_eval.py"
else
  PARALLEL="-n 10 --timeout 300"; TESTS=tests
fi

# phase 1a: tests with CUDA visible (results line by line: -v)
( pin 0-9 timeout $((END - $(el) - 10)) python -m pytest $TESTS $PARALLEL -v -p no:benchmark -p no:cacheprovider \
    -rfE --durations 10 --junitxml "$R/junit.xml" > "$OUT/tests.log" 2>&1; echo "pytest rc $?" >> "$OUT/tests.log" ) &
TESTS_PID=$!

# phase 1b: latency harness on the GPU, batch 1, fp32, shipped demo pair (beside the tests' CPU work)
D=$REPO/gpu/bin
HARNESS=(python -m fairseq_plugins.bench.latency "$D" --path checkpoints/demo/verifier.pt --drafter-path checkpoints/demo/drafter.pt
  --source-lang en --target-lang de --remove-bpe sentencepiece --max-len-a 1.2 --max-len-b 10 --threads 1
  --device "$DEV" --no-ctranslate2 --profile --max-sentences ${HSENT:-60} --rounds 2 --warmup 4
  --decoders beam1,specdec,specdec:length=fixed,specdec:length=adaptive,specdec++,specdec++:beta=5,tau=3
  --out-md "$R/harness.md" --out-json "$R/harness.json")
echo "${HARNESS[*]}" > "$R/harness.cmd"
pin 15 timeout ${HTIME:-150} "${HARNESS[@]}" > "$R/harness.log" 2>&1; echo "harness rc $?"
cat "$R/harness.md" 2>/dev/null; tail -5 "$R/harness.log"
echo "[$(el)s] harness done"

# phase 2: trainings, each stopping itself (--stop-time-hours) so that phase 3 starts at END
STOP=$(python -c "print(round(max(60, $END - $(el) - 40) / 3600, 4))")
echo "trainings: --stop-time-hours $STOP"
export RUNS=$R
for order in bidirectional single_l2r; do
  cores=10-11; [ $order = single_l2r ] && cores=12-13
  CPU=$CPU FP16=0 CONVERGE=1 ORDERS=$order DATA=$D SAVE_ROOT=$R/dt MAX_EPOCH=${DT_EPOCHS:-200} \
    pin $cores bash recipes/double-token/train-multi30k.sh --stop-time-hours "$STOP" ${DT_EXTRA:-} > "$R/dt_$order.out" 2>&1 &
done
CPU=$CPU FP16=0 SETTING=multi30k-drafter VERIFIER=$REPO/checkpoints/demo/verifier.pt DATA=$REPO/gpu/distilled \
  SAVE_DIR=$R/drafter LR=1.0e-4 WARMUP_INIT_LR=1.3e-4 WARMUP=6000 GLANCE_START=0.3 GLANCE_END=0.3 MAX_EPOCH=1000 \
  STOP_TIME_HOURS=$STOP KEEP_LAST_EPOCHS=1 pin 14-15 bash recipes/train-drafter.sh \
  --finetune-from-model "$REPO/checkpoints/demo/drafter.pt" --validate-interval ${DR_VALID:-4} --save-interval ${DR_VALID:-4} ${DR_EXTRA:-} \
  > "$R/drafter.out" 2>&1 &
sleep 30; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv 2>/dev/null
while [ "$(el)" -lt "$END" ] && [ -n "$(jobs -rp)" ]; do sleep 5; done
echo "[$(el)s] phase 3"
pkill -f -- "--save-dir $R/"; sleep 2  # this call's trainings only

# phase 3: what comes back
for order in bidirectional single_l2r; do
  ck=$R/dt/$order/checkpoint_avg_best.pt; [ -s "$ck" ] || ck=$R/dt/$order/checkpoint_best.pt
  python -m fairseq_plugins.scripts.export_checkpoint "$ck" "$OUT/dt_$order.pt" --fp16 || echo "export $order failed"
  grep 'valid on' "$R/dt/$order/train.log" | tail -2 | cut -c1-220
done
python -m fairseq_plugins.scripts.export_checkpoint "$R/drafter/checkpoint_best.pt" "$R/drafter_fp16.pt" --fp16 \
  && split -b 15M "$R/drafter_fp16.pt" "$OUT/drafter_fp16.pt.part-"
grep "valid on" "$R/drafter.out" | tail -3 | cut -c1-260
kill "$TESTS_PID" 2>/dev/null; wait "$TESTS_PID" 2>/dev/null
tail -40 "$OUT/tests.log"
(cd "$R" && tar czf "$OUT/logs.tgz" --ignore-failed-read install.log junit.xml harness.* dt_*.out drafter.out \
   dt/*/train.log dt/bleu-curves.png 2>/dev/null)
ls -la "$OUT"; echo "[$(el)s] done"
