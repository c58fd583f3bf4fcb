#!/usr/bin/env bash
# The README's main job: a small verifier/drafter pair, SpecDec vs greedy on a few sentences.
set -euo pipefail
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
python -m fairseq_plugins.quickstart --workdir "${QUICKSTART_DIR:-$(mktemp -d)/quickstart}" "$@"
