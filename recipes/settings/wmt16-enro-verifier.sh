# WMT16 en-ro (or ro-en: SRC=ro TGT=en) AT verifier, Table 7 settings, on distilled data.
# shellcheck shell=bash disable=SC2034
SRC=${SRC:-en}; TGT=${TGT:-ro}
DATA=${DATA:-$RUNS/wmt16-enro/distilled-$SRC$TGT/bin}
SAVE_DIR=${SAVE_DIR:-$RUNS/wmt16-enro/checkpoints/verifier-$SRC$TGT}
DROPOUT=${DROPOUT:-0.3}                      # smaller corpus (~610K pairs)
EVAL_BPE=${EVAL_BPE:-subword_nmt}
. "$REPO/recipes/settings/paper-at-table7.sh"
