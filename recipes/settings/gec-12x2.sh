# GEC Transformer with a deep encoder and a shallow decoder (12+2 layers, 256/1024/4 heads: the shape the
# aggressive-decoding GEC paper favours for speed), otherwise as gec-6x6.sh (same data, resumable checkpoints).
# shellcheck shell=bash disable=SC2034
ENC_LAYERS=${ENC_LAYERS:-12}; DEC_LAYERS=${DEC_LAYERS:-2}; WARMUP=${WARMUP:-1200}   # a longer warm-up for the 12 post-norm layers
SAVE_DIR=${SAVE_DIR:-$RUNS/gec-synth/transformer-12x2}
. "$REPO/recipes/settings/gec-6x6.sh"
