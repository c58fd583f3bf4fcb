# Small GEC model (3+3 layers, 30-minute cap) on the synthetic-error corpus of prepare-gec-synthetic.sh:
# src (noisy) -> tgt (clean).
# shellcheck shell=bash disable=SC2034
DATA=${DATA:-$RUNS/gec-synth/bin}; SRC=${SRC:-src}; TGT=${TGT:-tgt}
SAVE_DIR=${SAVE_DIR:-$RUNS/gec-synth/small}
ENC_LAYERS=${ENC_LAYERS:-3}; DEC_LAYERS=${DEC_LAYERS:-3}
EMBED_DIM=${EMBED_DIM:-256}; FFN_DIM=${FFN_DIM:-1024}; HEADS=${HEADS:-4}; SHARE=${SHARE:-all}
DROPOUT=${DROPOUT:-0.2}; LR=${LR:-0.0007}; WARMUP=${WARMUP:-400}
MAX_TOKENS=${MAX_TOKENS:-4096}; MAX_EPOCH=${MAX_EPOCH:-100}; STOP_TIME_HOURS=${STOP_TIME_HOURS:-0.5}
KEEP_LAST_EPOCHS=${KEEP_LAST_EPOCHS:-5}; CPU=${CPU:-1}; FP16=${FP16:-0}; LOG_INTERVAL=${LOG_INTERVAL:-20}
