# WMT16 en-ro teacher: Transformer-base on the raw (non-distilled) data (paper 5.1), trained with
# the verifier's Table 7 settings (the paper gives no separate teacher table).
# shellcheck shell=bash disable=SC2034
SRC=${SRC:-en}; TGT=${TGT:-ro}
DATA=${DATA:-$RUNS/wmt16-enro/bin}
SAVE_DIR=${SAVE_DIR:-$RUNS/wmt16-enro/checkpoints/teacher-$SRC$TGT}
. "$REPO/recipes/settings/wmt16-enro-verifier.sh"
