# WMT14 en-de (or de-en: SRC=de TGT=en) AT verifier with the paper's Table 7 settings.
# Trained on the sequence-level distilled data of the shared teacher (paper 5.1): set DATA to
# the binarized distilled set (recipes/distill.sh OUT=$RUNS/wmt14-ende/distilled-ende writes OUT/bin); the raw-data binarization also works for a baseline.
# shellcheck shell=bash disable=SC2034
SRC=${SRC:-en}; TGT=${TGT:-de}
DATA=${DATA:-$RUNS/wmt14-ende/distilled-$SRC$TGT/bin}
SAVE_DIR=${SAVE_DIR:-$RUNS/wmt14-ende/checkpoints/verifier-$SRC$TGT}
EVAL_BPE=${EVAL_BPE:-subword_nmt}
. "$REPO/recipes/settings/paper-at-table7.sh"
