# Multi30k en->de verifier of the SpecDec paper's size: Transformer-base, 6+6 layers, 512/2048/8
# heads (Table 7, left), with the dropout and batch of a 29K-sentence corpus instead of WMT's.
# On one CPU core with bfloat16 kernels an epoch takes 10-14 minutes on an Intel Xeon with AMX (30 epochs:
# 5-7 h), 20-25 on an AMD EPYC with AVX512-BF16 and no AMX (10-13 h); saves every 500 updates, so a
# stopped run resumes where it stopped (rerun the same command).  On a GPU: CPU=0 FP16=1.
# shellcheck shell=bash disable=SC2034
DATA=${DATA:-$RUNS/multi30k/bin}; SRC=${SRC:-en}; TGT=${TGT:-de}
SAVE_DIR=${SAVE_DIR:-$RUNS/multi30k-base/verifier}
ENC_LAYERS=${ENC_LAYERS:-6}; DEC_LAYERS=${DEC_LAYERS:-6}
EMBED_DIM=${EMBED_DIM:-512}; FFN_DIM=${FFN_DIM:-2048}; HEADS=${HEADS:-8}; SHARE=${SHARE:-all}
DROPOUT=${DROPOUT:-0.3}; LR=${LR:-5e-4}; WARMUP=${WARMUP:-2000}
MAX_TOKENS=${MAX_TOKENS:-4096}; MAX_EPOCH=${MAX_EPOCH:-30}; KEEP_LAST_EPOCHS=${KEEP_LAST_EPOCHS:-5}
SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-500}; KEEP_INTERVAL_UPDATES=${KEEP_INTERVAL_UPDATES:-2}
CPU=${CPU:-1}; FP16=${FP16:-0}; AUTOCAST=${AUTOCAST:-auto}; LOG_INTERVAL=${LOG_INTERVAL:-20}
