#!/usr/bin/env bash
# Short device call: rerun on CUDA the tests that failed in the first whole-suite run (after their fixes).
# Prepared as docs/experiments/gpu_session.sh says (.whl/ carried); run from the repo root on the device.
set -u
. docs/experiments/gpu_install.sh "$OUT/install.log"
timeout 120 python -m pytest -n 12 -v -p no:benchmark -p no:cacheprovider -rfE --timeout 110 tests/test_cuda.py \
  tests/test_bench_latency.py tests/test_bench_oracle.py "tests/test_registry.py::test_every_greedy_equivalent_decoder_equals_greedy" \
  "tests/test_recipes_dry_run.py::test_dry_run_chain" "tests/test_double_token_cli.py::test_systems_benchmark_side_by_side" > $OUT/tests.log 2>&1
echo "pytest rc $?"; grep -E '^(FAILED|ERROR)|passed|failed' $OUT/tests.log | tail -15
