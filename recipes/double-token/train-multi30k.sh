#!/usr/bin/env bash
# Double-token bidirectional decoding (Imamura & Sumita) on Multi30k: trains the double-token
# model and a same-size single-token baseline (the same model code with --target-order
# single_l2r, i.e. a standard transformer with learned decoder positions), then, with
# EVALUATE=1, decodes GEN_SUBSET with each at batch 1 (beam 1 and BEAM) side by side
# (python -m fairseq_plugins.bench.systems): BLEU, tokens/s and ratios to single_l2r in
# SAVE_ROOT/results.{md,png,json}.
#   DATA=$RUNS/multi30k/bin bash recipes/double-token/train-multi30k.sh
#   ORDERS="bidirectional single_l2r single_r2l double_l2r double_r2l" bash recipes/double-token/train-multi30k.sh
#                                              # all systems of the paper's Table 2 (but Mask-Predict)
#   CONVERGE=1 EVALUATE=1 bash recipes/double-token/train-multi30k.sh   # to convergence (patience 10, average
#                                              # of the 10 best), BLEU curves in SAVE_ROOT/bleu-curves.png
#   AUTOCAST=bf16 CONVERGE=1 bash recipes/double-token/train-multi30k.sh  # CPU training in bfloat16 autocast
#                                              # (--cpu-autocast bf16: ~2x the words/s on an AVX512-BF16 CPU)
#   TRAIN_DATA=$RUNS/multi30k/distilled/bin SAVE_ROOT=$RUNS/multi30k/double-token-distilled CONVERGE=1 EVALUATE=1 \
#     bash recipes/double-token/train-multi30k.sh  # trained on the verifier's distillation (the paper's remark),
#                                              # validated and tested on DATA's references
#   DRY_RUN=1 DATA=<small binarized dir> SRC=src TGT=tgt REMOVE_BPE=none bash recipes/double-token/train-multi30k.sh
# Every option below is an env var. Extra fairseq-train options: append after the script name.
# An order whose SAVE_ROOT/ORDER/training.done exists is not trained again (delete it to train on:
# fairseq-train resumes from checkpoint_last.pt); a run stopped by --stop-time-hours writes none, so the same command
# trains on. results.md is rewritten by every EVALUATE=1 run.
set -euo pipefail
main() {
  . "$(dirname "$0")/../lib/common.sh"
  # data / output
  DATA=${DATA:-$RUNS/multi30k/bin}             # fairseq-preprocess output (joined dictionary)
  TRAIN_DATA=${TRAIN_DATA:-}                   # a binarized dir whose train split replaces DATA's (same dictionaries;
                                               # valid/test stay DATA's references): SAVE_ROOT/data links both
  SRC=${SRC:-en}; TGT=${TGT:-de}
  SAVE_ROOT=${SAVE_ROOT:-$RUNS/multi30k/double-token}   # one sub-directory per order
  ORDERS=${ORDERS:-bidirectional single_l2r}   # --target-order of each system, trained in turn
  # model (double_token_transformer_small: 3+3 layers, 256/1024, 4 heads)
  ARCH=${ARCH:-double_token_transformer_small}
  SHARE=${SHARE:-all}                          # all | decoder | none  (all needs a joined dictionary)
  DROPOUT=${DROPOUT:-0.3}
  MAX_POSITIONS=${MAX_POSITIONS:-256}          # source and target; Multi30k sentences are short
  # optimisation (as recipes/settings/multi30k-verifier.sh)
  LR=${LR:-0.0007}; WARMUP=${WARMUP:-400}; WARMUP_INIT_LR=${WARMUP_INIT_LR:-1e-07}
  ADAM_BETAS=${ADAM_BETAS:-(0.9, 0.98)}; WEIGHT_DECAY=${WEIGHT_DECAY:-0.0001}; CLIP_NORM=${CLIP_NORM:-0.0}
  LABEL_SMOOTHING=${LABEL_SMOOTHING:-0.1}
  MAX_TOKENS=${MAX_TOKENS:-4096}; UPDATE_FREQ=${UPDATE_FREQ:-1}
  MAX_EPOCH=${MAX_EPOCH:-15}; MAX_UPDATE=${MAX_UPDATE:-0}   # 0 = no limit
  KEEP_LAST_EPOCHS=${KEEP_LAST_EPOCHS:-5}
  SEED=${SEED:-1}; LOG_INTERVAL=${LOG_INTERVAL:-20}
  EVAL_BLEU=${EVAL_BLEU:-0}                    # 1: BLEU on valid each epoch (greedy), best by BLEU
  CONVERGE=${CONVERGE:-0}                      # 1: to convergence, as the paper: EVAL_BLEU=1, early stopping after
  PATIENCE=${PATIENCE:-10}                     #    PATIENCE epochs without a better valid BLEU (MAX_EPOCH 200), then
  AVERAGE_BEST=${AVERAGE_BEST:-10}             #    the average of the AVERAGE_BEST best checkpoints is evaluated
  # evaluation
  EVALUATE=${EVALUATE:-0}                      # 1: decode GEN_SUBSET with every trained order
  GEN_SUBSET=${GEN_SUBSET:-test}               # test = test2016 flickr, test1 = test2017 flickr
  CHECKPOINT=${CHECKPOINT:-checkpoint_best.pt}
  BEAM=${BEAM:-5}; BATCH_SIZE=${BATCH_SIZE:-1}    # rows: beam 1 and BEAM (paper: beam 10)
  MAX_SENTENCES=${MAX_SENTENCES:-0}            # 0: the whole split
  BENCH_WARMUP=${BENCH_WARMUP:-10}             # untimed sentences per row
  MAX_LEN=${MAX_LEN:---max-len-a 1.2 --max-len-b 10}   # output length limit (as recipes/multi30k-cpu.sh)
  REMOVE_BPE=${REMOVE_BPE:-sentencepiece}      # none: the data has no subwords
  # hardware
  CPU=${CPU:-1}; FP16=${FP16:-0}; THREADS=${THREADS:-1}; NUM_WORKERS=${NUM_WORKERS:-$(default_num_workers)}
  AUTOCAST=${AUTOCAST:-off}                    # bf16: train with --cpu-autocast bf16 (CPU only, ~2x the words/s)

  if [ "$DRY_RUN" = 1 ]; then   # tiny model, a few updates, CPU
    ARCH=double_token_transformer_tiny; MAX_TOKENS=1000; MAX_EPOCH=2; MAX_UPDATE=0; WARMUP=10
    CPU=1; FP16=0; NUM_WORKERS=0; LOG_INTERVAL=5; EVAL_BLEU=0; KEEP_LAST_EPOCHS=2; BEAM=2
    MAX_SENTENCES=${DRY_SENTENCES:-5}; BENCH_WARMUP=1
  fi
  if [ "$CONVERGE" = 1 ]; then
    EVAL_BLEU=1; CHECKPOINT=checkpoint_avg_best.pt
    if [ "$DRY_RUN" = 1 ]; then AVERAGE_BEST=2; else MAX_EPOCH=${CONVERGE_MAX_EPOCH:-200}; fi
  fi
  case $AUTOCAST in off | bf16) ;; *) die "AUTOCAST must be off|bf16" ;; esac
  [ "$AUTOCAST" = off ] || [ "$CPU" = 1 ] || die "AUTOCAST=$AUTOCAST is for CPU training (CPU=1); on a GPU use FP16=1"
  export OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS
  if [ "$CPU" = 1 ]; then cpu_training_env; fi
  all_exist "$DATA/dict.$SRC.txt" "$DATA/dict.$TGT.txt" || die "no binarized data in DATA=$DATA (recipes/data/prepare-multi30k.sh)"
  if [ -n "$TRAIN_DATA" ]; then DATA=$(train_split_from "$TRAIN_DATA"); fi
  local order
  for order in $ORDERS; do train_one "$order" "$@"; done
  if [ "$CONVERGE" = 1 ]; then
    for order in $ORDERS; do average_best "$order"; done
    plot_curves
  fi
  if [ "$EVALUATE" = 1 ]; then evaluate; fi
}

# train_split_from DIR: SAVE_ROOT/data = DATA with its train split replaced by DIR's (symbolic links); prints its path
train_split_from() {
  local dir=$1 mixed=$SAVE_ROOT/data lang file
  for lang in "$SRC" "$TGT"; do
    all_exist "$dir/dict.$lang.txt" || die "TRAIN_DATA=$dir: no dict.$lang.txt (a fairseq-preprocess output directory)"
    cmp -s "$dir/dict.$lang.txt" "$DATA/dict.$lang.txt" || die "TRAIN_DATA=$dir: dict.$lang.txt differs from DATA's ($DATA)"
  done
  all_exist "$dir/train.$SRC-$TGT.$SRC.bin" "$dir/train.$SRC-$TGT.$TGT.bin" || die "TRAIN_DATA=$dir has no train.$SRC-$TGT split"
  mkdir -p "$mixed"
  for file in "$DATA"/*; do
    case $(basename "$file") in train.*) ;; *) ln -sfn "$(readlink -f "$file")" "$mixed/$(basename "$file")" ;; esac
  done
  for file in "$dir"/train.*; do ln -sfn "$(readlink -f "$file")" "$mixed/$(basename "$file")"; done
  echo "$mixed"
}

# average_best ORDER: SAVE_ROOT/ORDER/checkpoint_avg_best.pt = the mean of its kept best checkpoints
average_best() {
  local dir=$SAVE_ROOT/$1 best
  mapfile -t best < <(ls "$dir"/checkpoint.best_bleu_*.pt 2>/dev/null)
  [ "${#best[@]}" -gt 0 ] || die "$1: no checkpoint.best_bleu_*.pt in $dir (trained without CONVERGE=1?)"
  if newer_than_all "$dir/checkpoint_avg_best.pt" "${best[@]}"; then
    log "$1: $dir/checkpoint_avg_best.pt is newer than its best checkpoints: kept"; return
  fi
  log "$1: averaging its ${#best[@]} best checkpoints by valid BLEU -> $dir/checkpoint_avg_best.pt"
  average_checkpoints --inputs "${best[@]}" --output "$dir/checkpoint_avg_best.pt"
}

# newer_than_all FILE OTHER...: FILE exists and is newer than every OTHER
newer_than_all() {
  local file=$1 other; shift
  [ -e "$file" ] || return 1
  for other in "$@"; do [ "$file" -nt "$other" ] || return 1; done
}

# plot_curves: valid BLEU per epoch of every order -> SAVE_ROOT/bleu-curves.png (and the values on stdout)
plot_curves() {
  local order logs=() labels=()
  for order in $ORDERS; do logs+=("$SAVE_ROOT/$order/train.log"); labels+=(--label "$order"); done
  "$PYTHON" -m fairseq_plugins.scripts.plot_validation "${logs[@]}" "${labels[@]}" --metric bleu \
    --title "valid BLEU (greedy) per epoch" --out "$SAVE_ROOT/bleu-curves.png"
}

# train_one ORDER [fairseq-train options...]: SAVE_ROOT/ORDER/checkpoint*.pt
train_one() {
  local order=$1; shift
  local args=(
    "$DATA" --user-dir "$USER_DIR" --task double_token_translation --target-order "$order"
    --source-lang "$SRC" --target-lang "$TGT" --arch "$ARCH" --dropout "$DROPOUT"
    --max-source-positions "$MAX_POSITIONS" --max-target-positions "$MAX_POSITIONS"
    --optimizer adam --adam-betas "$ADAM_BETAS" --weight-decay "$WEIGHT_DECAY" --clip-norm "$CLIP_NORM"
    --lr "$LR" --lr-scheduler inverse_sqrt --warmup-updates "$WARMUP" --warmup-init-lr "$WARMUP_INIT_LR"
    --criterion label_smoothed_cross_entropy --label-smoothing "$LABEL_SMOOTHING"
    --max-tokens "$MAX_TOKENS" --update-freq "$UPDATE_FREQ"
    --max-epoch "$MAX_EPOCH" --max-update "$MAX_UPDATE" --keep-last-epochs "$KEEP_LAST_EPOCHS"
    --save-dir "$SAVE_ROOT/$order" --seed "$SEED" --log-interval "$LOG_INTERVAL" --log-format simple
    --num-workers "$NUM_WORKERS"
  )
  case $SHARE in
    all) args+=(--share-all-embeddings) ;;
    decoder) args+=(--share-decoder-input-output-embed) ;;
    none) ;;
    *) die "SHARE must be all|decoder|none" ;;
  esac
  if [ "$CPU" = 1 ]; then args+=(--cpu --cpu-autocast "$AUTOCAST"); elif [ "$FP16" = 1 ]; then args+=(--fp16); fi
  if [ "$EVAL_BLEU" = 1 ]; then
    args+=(--eval-bleu --eval-bleu-args '{"beam": 1}' --eval-bleu-detok space
           --best-checkpoint-metric bleu --maximize-best-checkpoint-metric)
  fi
  if [ "$CONVERGE" = 1 ]; then
    args+=(--patience "$PATIENCE" --keep-best-checkpoints "$AVERAGE_BEST")
    if [ "$REMOVE_BPE" != none ]; then args+=(--eval-bleu-remove-bpe "$REMOVE_BPE"); fi
  fi
  if all_exist "$SAVE_ROOT/$order/training.done"; then
    log "$order: trained already ($SAVE_ROOT/$order/training.done)"; return
  fi
  mkdir -p "$SAVE_ROOT/$order"
  local train_log=$SAVE_ROOT/$order/train.log logged=0
  [ -f "$train_log" ] && logged=$(wc -l < "$train_log")
  log "training $ARCH --target-order $order on $DATA -> $SAVE_ROOT/$order"
  fairseq-train "${args[@]}" "$@" 2>&1 | tee -a "$train_log"
  if tail -n +"$((logged + 1))" "$train_log" | grep -q "Stopping training due to cumulative_training_time"; then
    log "$order: stopped by --stop-time-hours, not finished: run the same command again to train on"
    return
  fi
  date > "$SAVE_ROOT/$order/training.done"
}

# evaluate: every order side by side at batch BATCH_SIZE -> SAVE_ROOT/results.{md,png,json}
evaluate() {
  local order baseline args=() checkpoints=()
  for order in $ORDERS; do
    args+=(--system "$order=$SAVE_ROOT/$order/$CHECKPOINT"); checkpoints+=("$SAVE_ROOT/$order/$CHECKPOINT")
  done
  if newer_than_all "$SAVE_ROOT/results.md" "${checkpoints[@]}" && has_rows "$SAVE_ROOT/results.md" $ORDERS; then
    log "$SAVE_ROOT/results.md has every order and is newer than their $CHECKPOINT: kept (delete it to decode again)"
    return
  fi
  baseline=$(first_of single_l2r $ORDERS)
  args+=(--baseline "$baseline" --beams "1,$BEAM" --gen-subset "$GEN_SUBSET" --batch-size "$BATCH_SIZE"
         --max-sentences "$MAX_SENTENCES" --warmup "$BENCH_WARMUP" --threads "$THREADS"
         --source-lang "$SRC" --target-lang "$TGT"
         --out-md "$SAVE_ROOT/results.md" --out-png "$SAVE_ROOT/results.png" --out-json "$SAVE_ROOT/results.json")
  if [ "$REMOVE_BPE" != none ]; then args+=(--remove-bpe "$REMOVE_BPE"); fi
  if [ "$CPU" != 1 ]; then args+=(--device cuda); if [ "$FP16" = 1 ]; then args+=(--fp16); fi; fi
  log "evaluating $ORDERS on $GEN_SUBSET (batch $BATCH_SIZE, beams 1,$BEAM, vs $baseline) -> $SAVE_ROOT/results.md"
  # shellcheck disable=SC2086  # MAX_LEN is a list of options
  "$PYTHON" -m fairseq_plugins.bench.systems "$DATA" "${args[@]}" $MAX_LEN >&2
}

# has_rows TABLE NAME...: the markdown TABLE has a row starting with each NAME
has_rows() {
  local table=$1 name; shift
  for name in "$@"; do grep -qF -- "| $name |" "$table" || return 1; done
}

# first_of WANTED ITEM...: WANTED if it is among the items, else the first item
first_of() {
  local wanted=$1; shift
  case " $* " in *" $wanted "*) echo "$wanted" ;; *) echo "$1" ;; esac
}

main "$@"
exit
