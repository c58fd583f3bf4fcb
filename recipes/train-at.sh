#!/usr/bin/env bash
# Train an autoregressive transformer (verifier, teacher, GEC model) with stock fairseq-train.
#   DATA=$RUNS/multi30k/bin SAVE_DIR=$RUNS/multi30k/verifier bash recipes/train-at.sh
#   SETTING=wmt14-ende-verifier bash recipes/train-at.sh        # presets: recipes/settings/*.sh
# Every option below is an env var; a SETTING file only changes defaults (env still wins).
# Launchers (LAUNCHER): local   - one process; fairseq itself uses every visible GPU
#                       torchrun - NGPUS processes per node x NNODES nodes (run once per node)
#                       slurm    - inside an sbatch allocation: srun, fairseq reads SLURM_* vars
# Extra fairseq-train options: append after the script name ("$@"), e.g. --patience 5.
set -euo pipefail
main() {
  . "$(dirname "$0")/lib/common.sh"
  load_setting

  # data / output
  DATA=${DATA:-$RUNS/multi30k/bin}             # fairseq-preprocess output (joined dictionary)
  SRC=${SRC:-en}; TGT=${TGT:-de}
  SAVE_DIR=${SAVE_DIR:-$(dirname "$DATA")/checkpoints/at-$SRC$TGT}
  TASK=${TASK:-translation}
  # model
  ARCH=${ARCH:-transformer}
  ENC_LAYERS=${ENC_LAYERS:-3}; DEC_LAYERS=${DEC_LAYERS:-3}
  EMBED_DIM=${EMBED_DIM:-256}; FFN_DIM=${FFN_DIM:-1024}; HEADS=${HEADS:-4}
  SHARE=${SHARE:-all}                          # all | decoder | none  (all needs --joined-dictionary)
  DROPOUT=${DROPOUT:-0.3}; ATTN_DROPOUT=${ATTN_DROPOUT:-0.0}; ACT_DROPOUT=${ACT_DROPOUT:-0.0}
  MAX_POSITIONS=${MAX_POSITIONS:-1024}         # source and target
  # optimisation
  LR=${LR:-0.0007}; WARMUP=${WARMUP:-4000}; WARMUP_INIT_LR=${WARMUP_INIT_LR:-1e-07}
  ADAM_BETAS=${ADAM_BETAS:-(0.9, 0.98)}; ADAM_EPS=${ADAM_EPS:-1e-08}
  WEIGHT_DECAY=${WEIGHT_DECAY:-0.0}; CLIP_NORM=${CLIP_NORM:-0.0}
  LABEL_SMOOTHING=${LABEL_SMOOTHING:-0.1}
  MAX_TOKENS=${MAX_TOKENS:-4096}               # per GPU/process
  UPDATE_FREQ=${UPDATE_FREQ:-}                 # batch = NGPUS*NNODES*MAX_TOKENS*UPDATE_FREQ tokens;
  PAPER_BATCH_TOKENS=${PAPER_BATCH_TOKENS:-}   # unset UPDATE_FREQ: ceil(PAPER_BATCH_TOKENS/(NGPUS*NNODES*MAX_TOKENS)), else 1
  MAX_EPOCH=${MAX_EPOCH:-12}; MAX_UPDATE=${MAX_UPDATE:-0}   # 0 = no limit
  STOP_TIME_HOURS=${STOP_TIME_HOURS:-0}        # wall-clock cap (0 = none)
  KEEP_LAST_EPOCHS=${KEEP_LAST_EPOCHS:-10}     # the last 10 are averaged (average-checkpoints.sh)
  SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-0}; KEEP_INTERVAL_UPDATES=${KEEP_INTERVAL_UPDATES:--1}
  SEED=${SEED:-1}; LOG_INTERVAL=${LOG_INTERVAL:-100}
  EVAL_BLEU=${EVAL_BLEU:-0}                    # 1: BLEU on valid each epoch (greedy), best by BLEU
  EVAL_BPE=${EVAL_BPE:-sentencepiece}          # how to undo subwords for --eval-bleu (sentencepiece|subword_nmt)
  # hardware
  CPU=${CPU:-0}; FP16=${FP16:-1}; THREADS=${THREADS:-1}
  AUTOCAST=${AUTOCAST:-off}                    # with CPU=1: bf16 = --cpu-autocast bf16 (matrix products in bfloat16;
                                               # a 6+6 x 256 model: 1.6x the updates per CPU second on AVX512-BF16),
                                               # auto = bf16 where the CPU has bfloat16 kernels; needs TASK to be a
                                               # plugin task (translation becomes speculative_translation)
  NUM_WORKERS=${NUM_WORKERS:-$(default_num_workers)}
  LAUNCHER=${LAUNCHER:-local}; NNODES=${NNODES:-1}; NODE_RANK=${NODE_RANK:-0}
  need_fairseq
  check_inputs "DATA=${DATA%%:*}/dict.$SRC.txt"
  NGPUS=${NGPUS:-$([ "$CPU" = 1 ] && echo 1 || "$PYTHON" -c 'import torch; print(max(1, torch.cuda.device_count()))')}  # per node
  MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}; MASTER_PORT=${MASTER_PORT:-29500}

  if [ "$DRY_RUN" = 1 ]; then   # tiny model, a few updates, CPU, one process
    ENC_LAYERS=1; DEC_LAYERS=1; ARCH=${DRY_ARCH:-transformer}
    EMBED_DIM=${DRY_EMBED_DIM:-32}; FFN_DIM=${DRY_FFN_DIM:-64}; HEADS=${DRY_HEADS:-2}   # a drafter: its verifier's
    MAX_TOKENS=${DRY_MAX_TOKENS:-1000}; UPDATE_FREQ=1; NGPUS=1; NNODES=1; MAX_EPOCH=${DRY_MAX_EPOCH:-3}; MAX_UPDATE=0
    WARMUP=10; STOP_TIME_HOURS=0; CPU=1; FP16=0; LAUNCHER=local; NUM_WORKERS=0; LOG_INTERVAL=5
    EVAL_BLEU=0; KEEP_LAST_EPOCHS=${DRY_KEEP_LAST_EPOCHS:-3}; SAVE_INTERVAL_UPDATES=0
  fi
  export OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS
  if [ "$CPU" = 1 ]; then cpu_training_env; fi
  AUTOCAST=$(resolve_autocast)
  if [ "$AUTOCAST" = bf16 ] && [ "$TASK" = translation ]; then TASK=speculative_translation; fi
  local world=$((NGPUS * NNODES))
  if [ -z "$UPDATE_FREQ" ]; then
    if [ -n "$PAPER_BATCH_TOKENS" ]; then UPDATE_FREQ=$(( (PAPER_BATCH_TOKENS + world * MAX_TOKENS - 1) / (world * MAX_TOKENS) ))
    else UPDATE_FREQ=1; fi
  fi

  local args=(
    "$DATA" --task "$TASK" --source-lang "$SRC" --target-lang "$TGT" --user-dir "$USER_DIR"
    --arch "$ARCH" --encoder-layers "$ENC_LAYERS" --decoder-layers "$DEC_LAYERS"
    --encoder-embed-dim "$EMBED_DIM" --decoder-embed-dim "$EMBED_DIM"
    --encoder-ffn-embed-dim "$FFN_DIM" --decoder-ffn-embed-dim "$FFN_DIM"
    --encoder-attention-heads "$HEADS" --decoder-attention-heads "$HEADS"
    --dropout "$DROPOUT" --attention-dropout "$ATTN_DROPOUT" --activation-dropout "$ACT_DROPOUT"
    --max-source-positions "$MAX_POSITIONS" --max-target-positions "$MAX_POSITIONS"
    --optimizer adam --adam-betas "$ADAM_BETAS" --adam-eps "$ADAM_EPS"
    --lr "$LR" --lr-scheduler inverse_sqrt --warmup-updates "$WARMUP" --warmup-init-lr "$WARMUP_INIT_LR"
    --weight-decay "$WEIGHT_DECAY" --clip-norm "$CLIP_NORM"
    --criterion label_smoothed_cross_entropy --label-smoothing "$LABEL_SMOOTHING"
    --max-tokens "$MAX_TOKENS" --update-freq "$UPDATE_FREQ"
    --max-epoch "$MAX_EPOCH" --max-update "$MAX_UPDATE" --stop-time-hours "$STOP_TIME_HOURS"
    --save-dir "$SAVE_DIR" --keep-last-epochs "$KEEP_LAST_EPOCHS"
    --save-interval-updates "$SAVE_INTERVAL_UPDATES" --keep-interval-updates "$KEEP_INTERVAL_UPDATES"
    --seed "$SEED" --log-interval "$LOG_INTERVAL" --log-format simple --num-workers "$NUM_WORKERS"
  )
  case $SHARE in
    all) args+=(--share-all-embeddings) ;;
    decoder) args+=(--share-decoder-input-output-embed) ;;
    none) ;;
    *) die "SHARE must be all|decoder|none" ;;
  esac
  if [ "$CPU" = 1 ]; then args+=(--cpu); elif [ "$FP16" = 1 ]; then args+=(--fp16); fi
  if [ "$AUTOCAST" = bf16 ]; then args+=(--cpu-autocast bf16); fi
  if [ "$EVAL_BLEU" = 1 ]; then
    args+=(--eval-bleu --eval-bleu-args '{"beam": 1}' --eval-bleu-remove-bpe "$EVAL_BPE"
           --eval-bleu-detok space --best-checkpoint-metric bleu --maximize-best-checkpoint-metric)
  fi
  mkdir -p "$SAVE_DIR"
  log "training $ARCH $(last_option --encoder-layers "$ENC_LAYERS" "$@")+$(last_option --decoder-layers "$DEC_LAYERS" "$@")" \
      "layers, dim $(last_option --encoder-embed-dim "$EMBED_DIM" "$@") on $DATA -> $SAVE_DIR ($LAUNCHER," \
      "$world x $MAX_TOKENS tokens x update-freq $UPDATE_FREQ = $((world * MAX_TOKENS * UPDATE_FREQ)) tokens/update)"

  local train_bin; train_bin=$(command -v fairseq-train)
  case $LAUNCHER in
    local) "$train_bin" "${args[@]}" "$@" ;;
    torchrun)
      torchrun --nnodes "$NNODES" --nproc_per_node "$NGPUS" --node_rank "$NODE_RANK" \
        --master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT" "$train_bin" "${args[@]}" "$@" ;;
    slurm)   # fairseq derives rank/world size from SLURM_* (one task per node or per GPU)
      srun "$train_bin" "${args[@]}" --distributed-world-size $((NGPUS * NNODES)) \
        --distributed-port "$MASTER_PORT" "$@" ;;
    *) die "LAUNCHER must be local|torchrun|slurm" ;;
  esac
}
# resolve_autocast: AUTOCAST as trained: off without CPU=1 or DRY_RUN=1, auto -> bf16 where the CPU has the kernels
resolve_autocast() {
  case $AUTOCAST in
    off|bf16|auto) ;;
    *) die "AUTOCAST must be off|bf16|auto" ;;
  esac
  if [ "$CPU" != 1 ] || [ "$DRY_RUN" = 1 ] || [ "$AUTOCAST" = off ]; then echo off; return; fi
  if [ "$AUTOCAST" = bf16 ]; then echo bf16; return; fi
  "$PYTHON" -c 'from fairseq_plugins.training.cpu_autocast import bf16_supported
print("bf16" if bf16_supported() else "off")'
}
main "$@"
exit
