#!/usr/bin/env bash
# One call on a lent GPU machine (session of 2026-11-26; 15 minutes of device time in all), after gpu_session.sh:
#   phase 0: install (carried wheels, the README's install.sh: docs/experiments/gpu_install.sh)
#   phase 1, the GPU quiet: the draft-length guard's trace on CUDA (docs/experiments/guard_trace.py: every
#            iteration's choice, tokens, seconds), then torch.compile of the verifier's layers, inductor default and
#            reduce-overhead (CUDA graphs) (docs/experiments/compile_verifier_layers.py)
#   phase 2, side by side: test_cuda.py's four console-script tests (fairseq-generate on CUDA, fp32/fp16, batch 1/32;
#            never seen to finish on a GPU) || the double-token pair on the single-token model's beam-5
#            distillation (issue 14, item 2) || the demo drafter trained on (issue 12)
#   phase 3: the drafter's fp16 export and every log into $OUT
# Prepared here (ignored through .git/info/exclude, carried): .whl/ and gpu/{bin,distilled} as gpu_session.sh says;
# gpu/dtd = the train split + dictionaries of $RUNS/multi30k/distilled-single-beam5/bin; gpu/m30/multi30k/spm/test.en.
# LOCAL=1: a dry check of the logic on a CPU machine (no install, tiny runs).
END=${END:-490}         # seconds after start by which phase 3 begins
. docs/experiments/gpu_prelude.sh
if [ "$LOCAL" = 1 ]; then SENTENCES=20; TESTS=tests/test_cuda.py; else SENTENCES=1000; TESTS="tests/test_cuda.py -k fairseq_generate"; fi

# phase 1: the GPU to itself
mkdir -p gpu/m30/multi30k && ln -sfn "$REPO/gpu/bin" gpu/m30/multi30k/bin
RUNS=$REPO/gpu/m30 pin 15 timeout 100 python docs/experiments/guard_trace.py 1 "$R/guard_trace.json" "$DEV" "$SENTENCES" \
  > "$R/guard_trace.log" 2>&1; echo "guard_trace rc $?"; grep '^pass' "$R/guard_trace.log"
echo "[$(el)s] guard trace done"
MODES=default,reduce-overhead; [ "$LOCAL" = 1 ] && MODES=default
RUNS=$REPO/gpu/m30 DEVICE=$DEV MODES=$MODES pin 15 timeout 120 python docs/experiments/compile_verifier_layers.py \
  > "$R/compile.log" 2>&1; echo "compile rc $?"; grep -E ' m=|Error' "$R/compile.log" | cut -c1-300
echo "[$(el)s] compile done"

# phase 2: tests || trainings, each training stopping itself (--stop-time-hours) so that phase 3 starts at END
PARALLEL=""; python -c 'import xdist' 2>/dev/null && PARALLEL="-n 4"
( pin 0-7 timeout $((END - $(el) - 10)) python -m pytest $TESTS $PARALLEL -v -p no:benchmark -p no:cacheprovider -rfE \
    --durations 10 --junitxml "$R/junit.xml" > "$R/tests.log" 2>&1; echo "pytest rc $?" >> "$R/tests.log" ) &
TESTS_PID=$!
STOP=$(python -c "print(round(max(60, $END - $(el) - 40) / 3600, 4))")
echo "trainings: --stop-time-hours $STOP"
export RUNS=$R
for order in bidirectional single_l2r; do
  cores=8-9; [ $order = single_l2r ] && cores=10-11
  CPU=$CPU FP16=0 CONVERGE=1 ORDERS=$order DATA=$REPO/gpu/bin TRAIN_DATA=$REPO/gpu/dtd SAVE_ROOT=$R/dtd \
    MAX_EPOCH=${DT_EPOCHS:-200} pin $cores bash recipes/double-token/train-multi30k.sh --stop-time-hours "$STOP" \
    ${DT_EXTRA:-} > "$R/dtd_$order.out" 2>&1 &
done
CPU=$CPU FP16=0 SETTING=multi30k-drafter VERIFIER=$REPO/checkpoints/demo/verifier.pt DATA=$REPO/gpu/distilled \
  SAVE_DIR=$R/drafter LR=1.0e-4 WARMUP_INIT_LR=1.3e-4 WARMUP=6000 GLANCE_START=0.3 GLANCE_END=0.3 MAX_EPOCH=1000 \
  STOP_TIME_HOURS=$STOP KEEP_LAST_EPOCHS=1 pin 12-14 bash recipes/train-drafter.sh \
  --finetune-from-model "$REPO/checkpoints/demo/drafter.pt" --validate-interval ${DR_VALID:-4} --save-interval ${DR_VALID:-4} ${DR_EXTRA:-} \
  > "$R/drafter.out" 2>&1 &
sleep 30; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv 2>/dev/null
while [ "$(el)" -lt "$END" ] && [ -n "$(jobs -rp)" ]; do sleep 5; done
echo "[$(el)s] phase 3"
pkill -f -- "--save-dir $R/"; sleep 2  # this call's trainings only

# phase 3: what comes back (at most 8 files)
python -m fairseq_plugins.scripts.export_checkpoint "$R/drafter/checkpoint_best.pt" "$R/drafter_fp16.pt" --fp16 \
  && split -b 15M "$R/drafter_fp16.pt" "$OUT/drafter_fp16.pt.part-"
grep "valid on" "$R/drafter.out" | tail -3 | cut -c1-260
for order in bidirectional single_l2r; do grep 'valid on' "$R/dtd/$order/train.log" | tail -2 | cut -c1-220; done
kill "$TESTS_PID" 2>/dev/null; wait "$TESTS_PID" 2>/dev/null
grep -E '^(FAILED|ERROR)|PASSED|passed|failed|pytest rc' "$R/tests.log" | tail -15
(cd "$R" && tar czf "$OUT/logs.tgz" --ignore-failed-read install.log junit.xml tests.log guard_trace.* compile.log \
   dtd_*.out drafter.out dtd/*/train.log 2>/dev/null)
ls -la "$OUT"; echo "[$(el)s] done"
