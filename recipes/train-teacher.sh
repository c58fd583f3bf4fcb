#!/usr/bin/env bash
# Teacher for sequence-level distillation (paper 5.1): Transformer-big for WMT14 (default),
# Transformer-base for WMT16 en-ro (SETTING=wmt16-enro-teacher); then the average of the last 10.
#   bash recipes/train-teacher.sh
# Same launch options as recipes/train-verifier.sh.
set -euo pipefail
export SETTING=${SETTING:-wmt14-ende-teacher}
bash "$(dirname "$0")/train-at.sh" "$@"
if [ "${NODE_RANK:-0}" = 0 ]; then bash "$(dirname "$0")/average-checkpoints.sh"; fi
