# Small Multi30k en->de AT verifier (CPU-trainable): 3+3 layers, 256/1024/4 heads.
# shellcheck shell=bash disable=SC2034
DATA=${DATA:-/work/runs/multi30k/bin}; SRC=${SRC:-en}; TGT=${TGT:-de}
SAVE_DIR=${SAVE_DIR:-/work/runs/multi30k/verifier}
ENC_LAYERS=${ENC_LAYERS:-3}; DEC_LAYERS=${DEC_LAYERS:-3}
EMBED_DIM=${EMBED_DIM:-256}; FFN_DIM=${FFN_DIM:-1024}; HEADS=${HEADS:-4}; SHARE=${SHARE:-all}
DROPOUT=${DROPOUT:-0.3}; LR=${LR:-0.0007}; WARMUP=${WARMUP:-400}
MAX_TOKENS=${MAX_TOKENS:-4096}; MAX_EPOCH=${MAX_EPOCH:-15}; KEEP_LAST_EPOCHS=${KEEP_LAST_EPOCHS:-5}
CPU=${CPU:-1}; FP16=${FP16:-0}; LOG_INTERVAL=${LOG_INTERVAL:-20}
