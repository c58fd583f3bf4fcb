# The drafter stages that recipes/bring-your-own-model.sh and recipes/multi30k-cpu.sh share: the verifier's
# distillations, the drafter's sequential head and SpecDec++'s drafter. Source after common.sh; each stage is skipped
# when its output exists. They read the recipe's variables:
#   OUT                 the run's folder
#   VERIFIER            the verifier's checkpoint, the distillations' teacher
#   DATA_BIN, DATA_SPM  the run's binarized data (the verifier's dictionaries) and its sentencepiece-encoded text
#   SRC, TGT, DEVICE (cpu | cuda), FP16, MORE_SOURCES (passes of word-substituted training sources the distillations
#   add), HEAD_UPDATES, THREADS (the head's CPU threads, default 1)
# and call the recipe's train_drafter DATA SAVE_DIR [OPTION...] (recipes/train-drafter.sh with its settings).
# shellcheck shell=bash

# distill DIR BEAM: the verifier's beam-BEAM translations of the training (and valid) sources and of MORE_SOURCES
# passes of word-substituted ones (recipes/distill.sh), binarized with its dictionaries in DIR/bin; once
distill() {
  if all_exist "$1/bin/test.$SRC-$TGT.$TGT.idx"; then log "distilled corpus exists: $1/bin"; return; fi
  TEACHER=$VERIFIER TEACHER_DATA=$DATA_BIN VERIFIER_DATA=$DATA_BIN RAW=$DATA_SPM OUT=$1 SRC=$SRC TGT=$TGT \
    TRAIN=train VALID=valid TEST=test BEAM=$2 MORE_SOURCES=$MORE_SOURCES DEVICE=$DEVICE FP16=$FP16 \
    bash "$REPO/recipes/distill.sh"
}

# train_head DATA DRAFTER SAVE_TO: a sequential head for the block drafter DRAFTER, trained on DATA for HEAD_UPDATES
# updates with the drafter frozen; SAVE_TO holds the drafter with its head, written once it is complete; once
train_head() {
  if all_exist "$3"; then log "sequential head trained already: $3"; return; fi
  mkdir -p "$(dirname "$3")"
  local on_cpu=(); [ "$DEVICE" = cpu ] && on_cpu=(--cpu)
  "$PYTHON" -m fairseq_plugins.scripts.train_sequential_head "$1" --drafter "$2" --save-to "$3" \
    --updates "$HEAD_UPDATES" --threads "${THREADS:-1}" "${on_cpu[@]}"   # written whole (save_atomically)
}

# specdecpp_drafter BEAM INIT SAVE_DIR FINISHED: SpecDec++'s drafter. The verifier's beam-BEAM translations
# (OUT/distilled-beamBEAM), then the block drafter INIT (without a head) fine-tuned on them into SAVE_DIR by the
# recipe's train_drafter, learning rate 1e-4 from the first update (it stays there through the caller's WARMUP
# updates), glancing ratio 0.3, checkpoints chosen by valid loss (spec_tokens_per_iter would count what lossless
# SpecDec accepts). The caller's environment sets WARMUP and how long it trains (MAX_UPDATE, STOP_TIME_HOURS...);
# the fine-tune is skipped when the file FINISHED exists
specdecpp_drafter() {
  local beam=$1 init=$2 save_dir=$3 finished=$4
  distill "$OUT/distilled-beam$beam" "$beam"
  if all_exist "$finished"; then log "SpecDec++ drafter trained already: $save_dir"; return; fi
  LR=1e-4 WARMUP_INIT_LR=1e-4 GLANCE_START=0.3 GLANCE_END=0.3 SPEC_EVAL=0 \
    train_drafter "$OUT/distilled-beam$beam/bin" "$save_dir" --finetune-from-model "$init"
}
