#!/usr/bin/env bash
# Prepared for the next lent GPU machine (not run yet): issue 13's lever, the drafter's batch-1 call replayed as one
# CUDA graph (docs/experiments/graphed_drafter.py; on an H200 the drafter's ~137 launches cost 0.47-0.49 greedy steps
# of an iteration's 1.23-1.28). Checked on a CPU only, where the same static step runs eagerly: drafts equal to the
# ordinary drafter cache's on every call (200 test2016 sentences, fixed and measured draft length).
#   phase 1: the same check on CUDA, now through the graph: 100 test2016 sentences, outputs and drafts compared
#   phase 2, the GPU to itself: the harness as gpu_session6.sh (float32, batch 1, the first 500 test2016 sentences,
#            2 rounds, --profile) with the rows beam1, specdec, specdec-graph, specdec++, specdec++-graph
# Carry .whl and gpu (docs/experiments/gpu_prepare.sh: gpu/bin and gpu/test.en); run once with timeout_s 600, then
# give the machine back. LOCAL=1: dry check on a CPU.
. docs/experiments/gpu_prelude.sh
export FAIRSEQ_PLUGINS_DECODERS=$REPO/docs/experiments/graphed_drafter.py
mkdir -p "$R/check/multi30k" "$R/check/m30raw"
ln -sfn "$REPO/gpu/bin" "$R/check/multi30k/bin"; ln -sf "$REPO/gpu/test.en" "$R/check/m30raw/test.en"

RUNS=$R/check pin 15 timeout "${CTIME:-120}" python docs/experiments/graphed_drafter.py "${CHECK_SENTENCES:-100}" "$DEV" \
  > "$R/check.log" 2>&1; echo "check rc $?"
grep -v "| INFO |" "$R/check.log" | tail -5; cp "$R/check.log" "$OUT/"
echo "[$(el)s] check done"

harness checkpoints/demo/drafter.pt beam1,specdec,specdec-graph,specdec++,specdec++-graph "${HTIME:-260}"
