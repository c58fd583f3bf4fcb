# Small Multi30k en->de drafter for CPU: the verifier's encoder (3 layers, 256), shared and frozen
# (decoding reuses the verifier's encoder output), + 2 decoder layers initialised from the verifier's
# first 2, k = 10 (a shallow decoder: the drafter re-reads its whole prefix every iteration, so its
# depth is paid per step).  The best checkpoint is the one with the most SpecDec tokens per iteration
# on valid (distill.sh's valid targets are the verifier's greedy translations).
# shellcheck shell=bash disable=SC2034
DATA=${DATA:-$RUNS/multi30k/distilled/bin}; SRC=${SRC:-en}; TGT=${TGT:-de}
SAVE_DIR=${SAVE_DIR:-$RUNS/multi30k/drafter}
VERIFIER=${VERIFIER:-$RUNS/multi30k/verifier/checkpoint_avg5.pt}
ENC_LAYERS=${ENC_LAYERS:-3}; DEC_LAYERS=${DEC_LAYERS:-2}
EMBED_DIM=${EMBED_DIM:-256}; FFN_DIM=${FFN_DIM:-1024}; HEADS=${HEADS:-4}; SHARE=${SHARE:-all}
DROPOUT=${DROPOUT:-0.1}; LR=${LR:-5e-4}; WARMUP=${WARMUP:-400}; ADAM_BETAS=${ADAM_BETAS:-(0.9, 0.999)}
MAX_TOKENS=${MAX_TOKENS:-4096}; MAX_EPOCH=${MAX_EPOCH:-40}; KEEP_LAST_EPOCHS=${KEEP_LAST_EPOCHS:-3}
MAX_POSITIONS=${MAX_POSITIONS:-1024}; BLOCK_SIZE=${BLOCK_SIZE:-10}
GLANCE_ANNEAL_UPDATES=${GLANCE_ANNEAL_UPDATES:-4000}   # time-capped runs have no --max-update to anneal over
CPU=${CPU:-1}; FP16=${FP16:-0}; LOG_INTERVAL=${LOG_INTERVAL:-20}
SHARE_ENCODER=${SHARE_ENCODER:-1}; DECODER_INIT=${DECODER_INIT:-first}; SPEC_EVAL=${SPEC_EVAL:-1}
SPEC_EVAL_STRIDE=${SPEC_EVAL_STRIDE:-2}   # SpecDec simulated on ~500 of the 1,014 valid sentences (time)
