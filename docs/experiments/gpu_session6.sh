#!/usr/bin/env bash
# The harness of gpu_session5.sh (float32, batch 1, the first 500 test2016 sentences, 2 rounds, --profile) with the
# drafter fine-tuned in that call (checkpoints/demo/drafter.pt from 2026-11-27 15:30 on), the GPU to itself, and no
# training: one short call for the few device minutes left. Carry .whl and gpu/bin; LOCAL=1: dry check on a CPU.
. docs/experiments/gpu_prelude.sh

harness checkpoints/demo/drafter.pt beam1,specdec,specdec++,specdec++:beta=5,tau=3 "${HTIME:-175}"
