# WMT14 en-de (or de-en) NAT drafter, paper Table 7 (right), on the teacher-distilled data.
# shellcheck shell=bash disable=SC2034
SRC=${SRC:-en}; TGT=${TGT:-de}
DATA=${DATA:-$RUNS/wmt14-ende/distilled-$SRC$TGT/bin}
SAVE_DIR=${SAVE_DIR:-$RUNS/wmt14-ende/checkpoints/drafter-$SRC$TGT}
VERIFIER=${VERIFIER:-$RUNS/wmt14-ende/checkpoints/verifier-$SRC$TGT/checkpoint_avg10.pt}
. "$REPO/recipes/settings/paper-drafter-table7.sh"
