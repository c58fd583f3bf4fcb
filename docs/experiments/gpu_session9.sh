#!/usr/bin/env bash
# Issue 13 on a lent GPU, after gpu_session8.sh (2026-11-28: the graphed calls took the demo pair's specdec from
# 2.51x to 5.39x stock greedy on an H200) made them the product's --cuda-graphs (auto: on for CUDA at batch 1):
#   phase 1: docs/experiments/graphed_drafter.py on CUDA: --cuda-graphs on vs off, drafts compared call by call
#   phase 2, the GPU to itself: the harness as gpu_session8.sh (float32, batch 1, 2 rounds, --profile) on the first
#            SENTENCES (default 250) test2016 sentences: beam1, specdec and specdec++ with --cuda-graphs off and
#            with the default (auto: on)
#   phase 3: tests/test_cuda.py's fairseq-generate tests (float32 identical to --beam 1, float16 close to --fp16
#            --beam 1; batch 1 and 32; specdec with --cuda-graphs auto and off) and tests/test_cuda_graphs.py
# Carry .whl and gpu (docs/experiments/gpu_prepare.sh); run once with timeout_s 480, then give the machine back.
# LOCAL=1: dry check on a CPU (there auto is off, so the "auto" rows run the ordinary caches).
SENTENCES=${SENTENCES:-250}
. docs/experiments/gpu_prelude.sh
graphed_check

harness checkpoints/demo/drafter.pt "beam1,specdec:cuda_graphs=off,specdec,specdec++:cuda_graphs=off,specdec++" \
  "${HTIME:-150}"

cuda_tests "cuda_graphs or fairseq_generate"
