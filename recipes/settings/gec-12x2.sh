# GEC Transformer with a deep encoder and a shallow decoder (12+2 layers, 256/512/4 heads, as many parameters as
# gec-6x6: the shape the aggressive-decoding GEC paper favours for speed), otherwise as gec-6x6.sh (same data,
# resumable checkpoints).
# shellcheck shell=bash disable=SC2034
# a longer warm-up for the 12 post-norm layers
ENC_LAYERS=${ENC_LAYERS:-12}; DEC_LAYERS=${DEC_LAYERS:-2}; WARMUP=${WARMUP:-1200}
SAVE_DIR=${SAVE_DIR:-$RUNS/gec-synth/transformer-12x2}
. "$REPO/recipes/settings/gec-6x6.sh"
