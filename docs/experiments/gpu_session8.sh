#!/usr/bin/env bash
# Ran on an H200 on 2026-11-28 (results: docs/results.md, GPU). Its decoders specdec-graph* came from the experiment
# graphed_drafter.py held then, now the product's --cuda-graphs (specdec-graph-all = specdec --cuda-graphs on), so
# this script no longer runs as it is: gpu_session9.sh is its successor. Issue 13's lever. On an H200 at batch 1 the demo pair is
# launch-bound (an iteration 1.23-1.28 greedy steps: the drafter's ~137 launches 0.47-0.49, the verifier's block
# 0.38-0.39, acceptance 0.21-0.22). docs/experiments/graphed_drafter.py runs the drafter's call, and with "-all" the
# verifier's block too, on static buffers replayed as CUDA graphs. Checked on a CPU only, where the same static steps
# run eagerly: drafts equal to the ordinary drafter cache's on every call, outputs equal to specdec's (300 test2016
# sentences, measured draft length) and to fairseq's --beam 1 (the harness, 200 sentences).
#   phase 1: the same check on CUDA, now through the graphs (CHECK_SENTENCES, default 60)
#   phase 2, the GPU to itself: the harness as gpu_session6.sh (float32, batch 1, 2 rounds, --profile) on the first
#            SENTENCES (default 300) test2016 sentences, rows beam1, specdec, specdec-graph, specdec-graph-all,
#            specdec++, specdec++-graph-all, and the other lever, docs/experiments/draft_tree.py: specdec-tree (the
#            drafter's top-3 at every position, 2 main-draft tokens after each branch: 4.47 tokens per iteration vs
#            3.58 on test2016 on a CPU, where its 65-token verification costs more than it gains and the default
#            draft-length guard turns drafting off) with the guard and drafting every iteration, and specdec++-tree
#            (5.30 tokens per iteration vs 4.37, BLEU 30.34 vs 30.26, greedy 29.69)
# Carry .whl and gpu (docs/experiments/gpu_prepare.sh: gpu/bin and gpu/test.en); run once with timeout_s 600, then
# give the machine back. LOCAL=1: dry check on a CPU.
SENTENCES=${SENTENCES:-300}
. docs/experiments/gpu_prelude.sh
export FAIRSEQ_PLUGINS_DECODERS=$REPO/docs/experiments/graphed_drafter.py,$REPO/docs/experiments/draft_tree.py
mkdir -p "$R/check/multi30k" "$R/check/m30raw"
ln -sfn "$REPO/gpu/bin" "$R/check/multi30k/bin"; ln -sf "$REPO/gpu/test.en" "$R/check/m30raw/test.en"

RUNS=$R/check pin 15 timeout "${CTIME:-150}" python docs/experiments/graphed_drafter.py "${CHECK_SENTENCES:-60}" "$DEV" \
  > "$R/check.log" 2>&1; CHECK_RC=$?; echo "check rc $CHECK_RC"
grep -v "| INFO |" "$R/check.log" | tail -8; cp "$R/check.log" "$OUT/"
echo "[$(el)s] check done"

ROWS=beam1,specdec,specdec-graph,specdec-graph-all,specdec++,specdec++-graph-all,specdec-tree
ROWS=$ROWS,specdec-tree:length=fixed,specdec++-tree
# a check that crashed (no summary line; a mismatch still prints one, and the harness counts sentences that differ
# from greedy): the GPU's baseline rows at least
grep -q "sentences on" "$R/check.log" || ROWS=beam1,specdec,specdec++,specdec-tree
harness checkpoints/demo/drafter.pt "$ROWS" "${HTIME:-300}"
