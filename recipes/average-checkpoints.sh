#!/usr/bin/env bash
# Average the last NUM_AVG epoch checkpoints (paper Appendix A: the last 10) into one file; NUM_AVG defaults to the
# setting's KEEP_LAST_EPOCHS (the epochs its training keeps), else 10.
#   SAVE_DIR=$RUNS/wmt14-ende/checkpoints/verifier-ende bash recipes/average-checkpoints.sh
#   SETTING=wmt14-ende-verifier bash recipes/average-checkpoints.sh     # SAVE_DIR from the setting
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"
SETTING=${SETTING:-}
load_setting
SAVE_DIR=${SAVE_DIR:?set SAVE_DIR or SETTING}
NUM_AVG=${NUM_AVG:-${KEEP_LAST_EPOCHS:-10}}
BY=${BY:-epoch}                      # epoch: checkpointN.pt | update: checkpoint_E_U.pt
if [ "$DRY_RUN" = 1 ]; then NUM_AVG=${DRY_NUM_AVG:-2}; fi
OUTPUT=${OUTPUT:-$SAVE_DIR/checkpoint_avg$NUM_AVG.pt}

if [ "$BY" = update ]; then sel=(--num-update-checkpoints "$NUM_AVG"); else sel=(--num-epoch-checkpoints "$NUM_AVG"); fi
log "averaging the last $NUM_AVG $BY checkpoints of $SAVE_DIR -> $OUTPUT"
average_checkpoints --inputs "$SAVE_DIR" "${sel[@]}" --output "$OUTPUT"
