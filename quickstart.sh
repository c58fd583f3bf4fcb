#!/usr/bin/env bash
# The README's main job: SpecDec vs greedy on a few sentences, with the shipped Multi30k demo pair
# (checkpoints/demo, also installed with the package), or a tiny pair trained on a toy corpus.
set -euo pipefail
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
demo=()
if [ -d "$(dirname "$0")/checkpoints/demo" ]; then demo=(--demo-dir "$(dirname "$0")/checkpoints/demo"); fi
python -m fairseq_plugins.quickstart --workdir "${QUICKSTART_DIR:-$(mktemp -d)/quickstart}" "${demo[@]}" "$@"
