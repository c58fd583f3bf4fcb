#!/usr/bin/env bash
# AT verifier with the paper's Table 7 settings, then the average of its last 10 checkpoints.
#   bash recipes/train-verifier.sh                                      # WMT14 en-de, all visible GPUs
#   SRC=de TGT=en bash recipes/train-verifier.sh                        # WMT14 de-en
#   SETTING=wmt16-enro-verifier bash recipes/train-verifier.sh          # WMT16 en-ro
#   NGPUS=8 NNODES=2 NODE_RANK=0 MASTER_ADDR=host0 LAUNCHER=torchrun bash recipes/train-verifier.sh
# All options: recipes/train-at.sh and recipes/settings/*.sh. Extra fairseq-train options: "$@".
set -euo pipefail
export SETTING=${SETTING:-wmt14-ende-verifier}
bash "$(dirname "$0")/train-at.sh" "$@"
if [ "${NODE_RANK:-0}" = 0 ]; then bash "$(dirname "$0")/average-checkpoints.sh"; fi
