# WMT14 en-de (or de-en) teacher: Transformer-big on the raw data (paper 5.1; the paper's teachers
# reach 29.3 / 32.1 BLEU). The paper gives no teacher hyperparameters: these are the 8-GPU
# settings of Ott et al. (2018, "Scaling NMT"), which the paper cites: lr 5e-4, 3,584 tokens x
# update-freq 16 per GPU (458,752 tokens/update), dropout 0.3, no clipping.
# shellcheck shell=bash disable=SC2034
SRC=${SRC:-en}; TGT=${TGT:-de}
DATA=${DATA:-$RUNS/wmt14-ende/bin}
SAVE_DIR=${SAVE_DIR:-$RUNS/wmt14-ende/checkpoints/teacher-big-$SRC$TGT}
ARCH=${ARCH:-transformer}
ENC_LAYERS=${ENC_LAYERS:-6}; DEC_LAYERS=${DEC_LAYERS:-6}
EMBED_DIM=${EMBED_DIM:-1024}; FFN_DIM=${FFN_DIM:-4096}; HEADS=${HEADS:-16}; SHARE=${SHARE:-all}
DROPOUT=${DROPOUT:-0.3}; LABEL_SMOOTHING=${LABEL_SMOOTHING:-0.1}
MAX_TOKENS=${MAX_TOKENS:-3584}; PAPER_BATCH_TOKENS=${PAPER_BATCH_TOKENS:-$((8 * 3584 * 16))}
LR=${LR:-5e-4}; ADAM_BETAS=${ADAM_BETAS:-(0.9, 0.98)}; WARMUP=${WARMUP:-4000}; WARMUP_INIT_LR=${WARMUP_INIT_LR:-1e-07}
WEIGHT_DECAY=${WEIGHT_DECAY:-0.0}; CLIP_NORM=${CLIP_NORM:-0.0}
MAX_UPDATE=${MAX_UPDATE:-100000}; MAX_EPOCH=${MAX_EPOCH:-1000}; KEEP_LAST_EPOCHS=${KEEP_LAST_EPOCHS:-10}
EVAL_BPE=${EVAL_BPE:-subword_nmt}
FP16=${FP16:-1}; CPU=${CPU:-0}; NUM_WORKERS=${NUM_WORKERS:-4}; LOG_INTERVAL=${LOG_INTERVAL:-100}
