# SpecDec paper, Appendix A, Table 7 (left): the AT verifier, Transformer-base, 8 V100 GPUs.
# Sourced by the wmt* settings; every value stays overridable from the environment.
# Batch: 8 GPUs x 20,000 tokens x update-freq 4 = 640K tokens/update (fairseq's --max-tokens is
# per GPU). train-at.sh derives UPDATE_FREQ from PAPER_BATCH_TOKENS for any NGPUS x NNODES
# (e.g. 4 GPUs -> 8, 16 GPUs -> 2); on smaller GPUs lower MAX_TOKENS and it rises to match.
# shellcheck shell=bash disable=SC2034
ARCH=${ARCH:-transformer}
ENC_LAYERS=${ENC_LAYERS:-6}; DEC_LAYERS=${DEC_LAYERS:-6}
EMBED_DIM=${EMBED_DIM:-512}; FFN_DIM=${FFN_DIM:-2048}; HEADS=${HEADS:-8}; SHARE=${SHARE:-all}
DROPOUT=${DROPOUT:-0.1}                      # Table 7: tuned in [0.1, 0.2, 0.3]
LABEL_SMOOTHING=${LABEL_SMOOTHING:-0.1}
MAX_TOKENS=${MAX_TOKENS:-20000}; PAPER_BATCH_TOKENS=${PAPER_BATCH_TOKENS:-$((8 * 20000 * 4))}
MAX_POSITIONS=${MAX_POSITIONS:-1000}
LR=${LR:-1e-3}; ADAM_BETAS=${ADAM_BETAS:-(0.9, 0.99)}; ADAM_EPS=${ADAM_EPS:-1e-08}
WARMUP=${WARMUP:-4000}; WARMUP_INIT_LR=${WARMUP_INIT_LR:-1e-07}
WEIGHT_DECAY=${WEIGHT_DECAY:-0.00001}; CLIP_NORM=${CLIP_NORM:-3.0}
MAX_UPDATE=${MAX_UPDATE:-100000}; MAX_EPOCH=${MAX_EPOCH:-1000}
KEEP_LAST_EPOCHS=${KEEP_LAST_EPOCHS:-10}     # Appendix A: average the last 10 checkpoints
FP16=${FP16:-1}; CPU=${CPU:-0}; NUM_WORKERS=${NUM_WORKERS:-4}; LOG_INTERVAL=${LOG_INTERVAL:-100}
