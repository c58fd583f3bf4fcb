#!/usr/bin/env bash
# The second call of the session of 2026-11-26 on the H200, on the machine still warm after gpu_session2.sh (its
# /tmp/runs kept): the distilled double-token pair trained on from checkpoint_last.pt until 0.148 h of cumulative
# training time (fairseq's --stop-time-hours counts across resumes), then each order's 10-best average exported
# in fp16 into $OUT (the recipe's CONVERGE=1 averages at the end, also after a stop by time).
set -u; source "$(dirname "$(command -v python3)")/activate"
python -c 'import fairseq_plugins' 2>/dev/null || . docs/experiments/gpu_install.sh /tmp/i2.log
export RUNS=/tmp/runs; rm -f /tmp/runs/dtd/*/training.done /tmp/runs/dtd/*/checkpoint_avg_best.pt
for o in bidirectional single_l2r; do
  c=8-11; [ $o = single_l2r ] && c=12-15
  CPU=0 FP16=0 CONVERGE=1 ORDERS=$o DATA=$PWD/gpu/bin TRAIN_DATA=$PWD/gpu/dtd SAVE_ROOT=/tmp/runs/dtd MAX_EPOCH=200 \
    taskset -c $c bash recipes/double-token/train-multi30k.sh --stop-time-hours 0.148 > /tmp/runs/dtd2_$o.out 2>&1 &
done; wait
for o in bidirectional single_l2r; do
  d=/tmp/runs/dtd/$o; grep 'valid on' $d/train.log | tail -1 | cut -c1-200
  ck=$d/checkpoint_avg_best.pt; [ -s $ck ] || ck=$d/checkpoint_best.pt
  python -m fairseq_plugins.scripts.export_checkpoint $ck /tmp/runs/dtd_$o.pt --fp16 && split -b 15M /tmp/runs/dtd_$o.pt $OUT/dtd_$o.pt.part-
done
tar czf $OUT/logs2.tgz -C /tmp/runs dtd/bidirectional/train.log dtd/single_l2r/train.log dtd2_bidirectional.out dtd2_single_l2r.out
ls -la $OUT
