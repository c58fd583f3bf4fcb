#!/usr/bin/env bash
# Issue 12's open GPU question, for the next lent GPU: the demo drafter has a sequential head since 2026-12-03, and
# --cuda-graphs runs it inside the drafter's graph (its walk as k gathers), checked only eagerly on a CPU so far.
#   phase 1: docs/experiments/graphed_drafter.py on CUDA with the demo drafter (its head): --cuda-graphs on vs off,
#            drafts compared call by call
#   phase 2, the GPU to itself: the harness (float32, batch 1, 2 rounds, --profile) on the first SENTENCES (default
#            250) test2016 sentences: beam1; specdec with graphs off, with the default (graphs and the head), with
#            the head left out (graphs, the block's drafts: the H200's 5.31x row of the README); specdec++
#   phase 3: tests/test_cuda.py's head cases (in-process parity with a head drafter, the replayed graphs with and
#            without a head) and tests/test_cuda_graphs.py
# Prepare on the CPU machine: `RUNS=... bash docs/experiments/gpu_prepare.sh` (carry ".whl" and "gpu"); run once with
# timeout_s 480, then give the machine back. LOCAL=1: dry check on a CPU (there auto is off, so "specdec" runs the
# ordinary caches).
SENTENCES=${SENTENCES:-250}
. docs/experiments/gpu_prelude.sh
graphed_check

harness checkpoints/demo/drafter.pt \
  "beam1,specdec:cuda_graphs=off,specdec,specdec:head_candidates=0,specdec++" "${HTIME:-150}"

cuda_tests "cuda_graphs or graphed or head or batch_32"
