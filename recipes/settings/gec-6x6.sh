# GEC Transformer, 6+6 layers, 256/512/4 heads (9.96M parameters: 19.9 MB as float16, small enough to ship),
# on the synthetic-error corpus of prepare-gec-synthetic.sh (src = noisy, tgt = clean; joined 8k sentencepiece
# dictionary), sized for one CPU thread.
# Resumable: a checkpoint every SAVE_INTERVAL_UPDATES updates (the last KEEP_INTERVAL_UPDATES kept) and at each
# epoch's end; rerunning the same command goes on from SAVE_DIR/checkpoint_last.pt.
# shellcheck shell=bash disable=SC2034
DATA=${DATA:-$RUNS/gec-synth/bin}; SRC=${SRC:-src}; TGT=${TGT:-tgt}
SAVE_DIR=${SAVE_DIR:-$RUNS/gec-synth/transformer-6x6}
ENC_LAYERS=${ENC_LAYERS:-6}; DEC_LAYERS=${DEC_LAYERS:-6}
EMBED_DIM=${EMBED_DIM:-256}; FFN_DIM=${FFN_DIM:-512}; HEADS=${HEADS:-4}; SHARE=${SHARE:-all}
DROPOUT=${DROPOUT:-0.1}; LR=${LR:-0.0007}; WARMUP=${WARMUP:-800}
MAX_TOKENS=${MAX_TOKENS:-4096}
MAX_EPOCH=${MAX_EPOCH:-30}; STOP_TIME_HOURS=${STOP_TIME_HOURS:-0}; KEEP_LAST_EPOCHS=${KEEP_LAST_EPOCHS:-5}
SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-200}; KEEP_INTERVAL_UPDATES=${KEEP_INTERVAL_UPDATES:-2}
CPU=${CPU:-1}; FP16=${FP16:-0}; AUTOCAST=${AUTOCAST:-auto}; LOG_INTERVAL=${LOG_INTERVAL:-50}
