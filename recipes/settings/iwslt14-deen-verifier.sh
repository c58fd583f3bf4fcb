# IWSLT14 de-en AT model, fairseq's standard transformer_iwslt_de_en recipe (1 GPU, 4,096 tokens):
# 6+6 layers, 512 dims, 1,024 FFN, 4 heads, dropout 0.3, lr 5e-4, weight decay 1e-4.
# shellcheck shell=bash disable=SC2034
SRC=${SRC:-de}; TGT=${TGT:-en}
DATA=${DATA:-$RUNS/iwslt14-deen/bin}
SAVE_DIR=${SAVE_DIR:-$RUNS/iwslt14-deen/checkpoints/at-$SRC$TGT}
ENC_LAYERS=${ENC_LAYERS:-6}; DEC_LAYERS=${DEC_LAYERS:-6}
EMBED_DIM=${EMBED_DIM:-512}; FFN_DIM=${FFN_DIM:-1024}; HEADS=${HEADS:-4}; SHARE=${SHARE:-all}
DROPOUT=${DROPOUT:-0.3}; LR=${LR:-5e-4}; ADAM_BETAS=${ADAM_BETAS:-(0.9, 0.98)}; WARMUP=${WARMUP:-4000}
WEIGHT_DECAY=${WEIGHT_DECAY:-0.0001}; MAX_TOKENS=${MAX_TOKENS:-4096}; PAPER_BATCH_TOKENS=${PAPER_BATCH_TOKENS:-4096}
MAX_UPDATE=${MAX_UPDATE:-0}; MAX_EPOCH=${MAX_EPOCH:-100}; KEEP_LAST_EPOCHS=${KEEP_LAST_EPOCHS:-10}
EVAL_BPE=${EVAL_BPE:-subword_nmt}; FP16=${FP16:-1}; CPU=${CPU:-0}
