#!/usr/bin/env bash
# Prepared for the next lent GPU machine (not run yet). The 2026-11-26 session's guard trace on a quiet H200 decoded
# all 1,000 test2016 sentences with default SpecDec in 25.2 s; fairseq's greedy step there measured ~4.8 ms (15 steps
# a sentence: ~72 s), so SpecDec may be near issue 13's 3x on a quiet GPU, where the README's table (1.57-1.98x) ran
# beside the tests. This call measures it, then trains what issue 14 needs:
#   phase 0: install (carried wheels: docs/experiments/gpu_install.sh)
#   phase 1, the GPU to itself: the harness, float32, batch 1, the first 500 test2016 sentences (SENTENCES=0: all;
#            ~2x the time, which the 300 s limit may not hold with --profile), the rows side by side in 2 rounds
#            (beam1, specdec, specdec:length=fixed, specdec++:beta=5,tau=3) with --profile
#   phase 1b: tests/test_cuda.py's parity tests (not its console-script ones), for this session's attention change
#   phase 2: the double-token pair on the single-token model's distillation (as gpu_session2.sh), to END; without
#            that distillation, issue 12's drafter: with gpu/dda, the demo drafter fine-tuned on the first
#            distillation and on it plus the augmented sources (train1), side by side; else (or SOURCES=0)
#            docs/experiments/feature_drafter.py (as shipped, the verifier's hidden states as input, a KL target)
#   phase 3: their 10-best averages or best checkpoints (fp16) and the logs into $OUT
# Prepared here by docs/experiments/gpu_prepare.sh (.whl/, gpu/bin, gpu/dtd when a double-token distillation
# exists, gpu/dd when the drafter's does, gpu/dda when the augmented one does: without any, phases 2-3 are skipped); carry .whl and gpu. LOCAL=1: dry
# check on a CPU. Device time is 15 minutes a session (machine start included): run it once with timeout_s 600, then
# give the machine back.
END=${END:-500}         # seconds after start by which phase 3 begins
. docs/experiments/gpu_prelude.sh

harness checkpoints/demo/drafter.pt beam1,specdec,specdec:length=fixed,specdec++:beta=5,tau=3 "${HTIME:-300}"

# phase 1b: the CUDA parity tests again (the 2026-11-26 fourth session changed the lean layers' attention to
# scaled_dot_product_attention and decodes in inference mode; only CPU-checked since); console-script tests left out
pin 15 timeout ${TTIME:-150} python -m pytest tests/test_cuda.py -k "not fairseq_generate" -q -p no:benchmark \
  -p no:cacheprovider -rfE > "$R/tests.log" 2>&1; echo "cuda tests rc $?"
grep -E '^(FAILED|ERROR)|passed|failed' "$R/tests.log" | tail -5
echo "[$(el)s] tests done"

if [ "${SOURCES:-1}" = 1 ] && [ ! -d "$REPO/gpu/dtd" ] && [ -d "$REPO/gpu/dda" ]; then
  # issue 12: the drafter overfits its 29,000 sources (4.03 tokens per iteration on them, 3.22 on test2016); more
  # sources (recipes/distill.sh MORE_SOURCES=N, the verifier's greedy translations of context-matched substitutions
  # of the training sources, as train1, train2 beside the first distillation) were the first CPU fine-tune that
  # rose (valid 3.282 -> 3.384, test2016 3.22 -> 3.37: today's demo drafter, trained on 57,543 of them; gpu/dda
  # from $RUNS/multi30k/aug/bin2 holds 168,263). Here: the demo drafter on the first distillation alone and on all
  # sources, side by side for the same time, valid spec_tokens_per_iter every 560 updates
  STOP=$(python -c "print(round(max(60, $END - $(el) - 40) / 3600, 4))")
  export RUNS=$R
  for arm in dd dda; do
    cores=0-6; [ $arm = dda ] && cores=7-14
    CPU=$CPU FP16=0 SETTING=multi30k-drafter VERIFIER=$REPO/checkpoints/demo/verifier.pt DATA=$REPO/gpu/$arm \
      SAVE_DIR=$R/$arm DROPOUT=0.1 LR=1.0e-4 WARMUP_INIT_LR=1.3e-4 WARMUP=6000 GLANCE_START=0.3 GLANCE_END=0.3 \
      MAX_EPOCH=1000 STOP_TIME_HOURS=$STOP KEEP_LAST_EPOCHS=1 pin $cores bash recipes/train-drafter.sh \
      --finetune-from-model "$REPO/checkpoints/demo/drafter.pt" --validate-interval 1000 --save-interval 1000 \
      --validate-interval-updates 560 --save-interval-updates 560 --keep-interval-updates 1 \
      > "$R/$arm.out" 2>&1 &
    TRAIN_PIDS="${TRAIN_PIDS:-} $!"
  done
  while [ "$(el)" -lt "$END" ] && [ -n "$(jobs -rp)" ]; do sleep 5; done
  pkill -f -- "--save-dir $R/"; wait $TRAIN_PIDS
  for arm in dd dda; do
    grep "valid on" "$R/$arm.out" | tail -2 | cut -c1-260
    python -m fairseq_plugins.scripts.export_checkpoint "$R/$arm/checkpoint_best.pt" "$R/$arm.pt" --fp16 \
      && split -b 15M "$R/$arm.pt" "$OUT/drafter_$arm.pt.part-"
  done
elif [ ! -d "$REPO/gpu/dtd" ] && [ -d "$REPO/gpu/dd" ]; then
  # issue 12: the demo drafter fine-tuned as shipped, with the verifier's hidden states as extra input, and with
  # the verifier's distribution as a KL target (docs/experiments/feature_drafter.py; on the CPU 200-300 updates
  # showed no gain for either), on the GPU until END
  ARMS=${ARMS:-plain,feature,kl} DATA=$REPO/gpu/dd DEVICE=$DEV TRAIN_SECONDS=$(( END - $(el) > 120 ? END - $(el) - 60 : 60 )) pin 0-14 python docs/experiments/feature_drafter.py \
    100000 500 4096 "$OUT/feature_drafter.json" > "$R/feature_drafter.out" 2>&1; echo "feature drafter rc $?"
  grep '^update' "$R/feature_drafter.out" | tail -4
elif [ ! -d "$REPO/gpu/dtd" ]; then
  echo "no gpu/dtd and no gpu/dd (gpu_prepare.sh without DISTILLED or DRAFTER_DATA): no training"
else
  STOP=$(python -c "print(round(max(60, $END - $(el) - 40) / 3600, 4))")
  export RUNS=$R
  for order in bidirectional single_l2r; do
    cores=0-6; [ $order = single_l2r ] && cores=7-14
    CPU=$CPU FP16=0 CONVERGE=1 ORDERS=$order DATA=$REPO/gpu/bin TRAIN_DATA=$REPO/gpu/dtd SAVE_ROOT=$R/dtd \
      MAX_EPOCH=${DT_EPOCHS:-200} pin $cores bash recipes/double-token/train-multi30k.sh --stop-time-hours "$STOP" \
      > "$R/dtd_$order.out" 2>&1 &
    TRAIN_PIDS="${TRAIN_PIDS:-} $!"
  done
  while [ "$(el)" -lt "$END" ] && [ -n "$(jobs -rp)" ]; do sleep 5; done
  pkill -f -- "--save-dir $R/"; wait $TRAIN_PIDS  # not a bare wait: it would wait for the log's tee
  for order in bidirectional single_l2r; do
    d=$R/dtd/$order; grep 'valid on' $d/train.log | tail -1 | cut -c1-200
    ck=$d/checkpoint_avg_best.pt; [ -s $ck ] || ck=$d/checkpoint_best.pt
    python -m fairseq_plugins.scripts.export_checkpoint $ck $R/dtd_$order.pt --fp16 && split -b 15M $R/dtd_$order.pt $OUT/dtd_$order.pt.part-
  done
fi
(cd "$R" && tar czf "$OUT/logs.tgz" --ignore-failed-read install.log harness.* tests.log dtd_*.out dtd/*/train.log \
  dd.out dda.out feature_drafter.out 2>/dev/null)
ls -la "$OUT"; echo "[$(el)s] done"
