# Drafter of a small verifier (embeddings under 512; e.g. Multi30k's 3+3, 256): 2 decoder layers, k = 10,
# trainable on a CPU. bring-your-own-model.sh picks it for such verifiers; DATA/SAVE_DIR/VERIFIER and
# the sizes (the verifier's) come from the caller.
# shellcheck shell=bash disable=SC2034
DEC_LAYERS=${DEC_LAYERS:-2}; SHARE=${SHARE:-all}
DROPOUT=${DROPOUT:-0.1}; LR=${LR:-5e-4}; WARMUP=${WARMUP:-400}; ADAM_BETAS=${ADAM_BETAS:-(0.9, 0.999)}
MAX_TOKENS=${MAX_TOKENS:-4096}; MAX_EPOCH=${MAX_EPOCH:-40}; KEEP_LAST_EPOCHS=${KEEP_LAST_EPOCHS:-3}
BLOCK_SIZE=${BLOCK_SIZE:-10}
GLANCE_ANNEAL_UPDATES=${GLANCE_ANNEAL_UPDATES:-4000}   # time-capped runs have no --max-update to anneal over
LOG_INTERVAL=${LOG_INTERVAL:-20}
# on a CPU with bfloat16 kernels, bfloat16 autocast (recipes/train-at.sh): a Transformer-base verifier's drafter
# (its 6 x 512 encoder shared, 2 decoder layers) makes 2.4x the updates per second, with the same losses
AUTOCAST=${AUTOCAST:-auto}
# as the Multi30k preset: the encoder is the verifier's (shared, frozen: decoding reuses its output), the
# decoder starts from the verifier's first layers, the best checkpoint has the most SpecDec tokens/iteration
SHARE_ENCODER=${SHARE_ENCODER:-1}; DECODER_INIT=${DECODER_INIT:-first}; SPEC_EVAL=${SPEC_EVAL:-1}
