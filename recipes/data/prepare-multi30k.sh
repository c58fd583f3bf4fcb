#!/usr/bin/env bash
# Multi30k (Task 1) en-de: joint sentencepiece + fairseq-preprocess (joined dictionary).
#   bash recipes/data/prepare-multi30k.sh
# Reads the raw (untokenized, cased) files MULTI30K_DIR/{train,val,test_2016_flickr,test_2017_flickr}.{en,de} (the
# official names; MULTI30K_DIR as recipes/lib/demo_data.sh reads it); downloads them from the official repository
# when missing.
# Output (OUT_DIR):
#   raw/{train,valid,test,test1}.{en,de}   plain text; test/test1 are the sacreBLEU references
#   spm/spm.model, spm/{split}.{en,de}     joint sentencepiece model, encoded text
#   bin/                                   binarized data (valid=val, test=test2016, test1=test2017)
# Stages whose outputs exist are skipped (delete them to redo).
set -euo pipefail
. "$(dirname "$0")/../lib/common.sh"

MULTI30K_DIR=${MULTI30K_DIR:-$REPO/../shared/data/multi30k/raw}   # local copy of the official raw files
MULTI30K_URL=${MULTI30K_URL:-https://github.com/multi30k/dataset/raw/master/data/task1/raw}
OUT_DIR=${OUT_DIR:-$RUNS/multi30k}
BIN_DIR=${BIN_DIR:-$OUT_DIR/bin}      # fairseq-preprocess output
SRC=${SRC:-en}
TGT=${TGT:-de}
VOCAB_SIZE=${VOCAB_SIZE:-8000}       # joint sentencepiece vocabulary
SPM_TYPE=${SPM_TYPE:-unigram}        # unigram | bpe
WORKERS=${WORKERS:-1}                # fairseq-preprocess workers
DRY_LINES=${DRY_LINES:-200}          # DRY_RUN=1: lines kept per split
if [ "$DRY_RUN" = 1 ]; then VOCAB_SIZE=${DRY_VOCAB_SIZE:-300}; SPM_FLAGS=${SPM_FLAGS:---soft-vocab-limit}; fi

# official split name -> fairseq split name
declare -A SPLITS=([train]=train [val]=valid [test_2016_flickr]=test [test_2017_flickr]=test1)
RAW=$OUT_DIR/raw
mkdir -p "$RAW"

# 1. raw text (local copy, else download)
for name in "${!SPLITS[@]}"; do
  for lang in "$SRC" "$TGT"; do
    dest=$RAW/${SPLITS[$name]}.$lang
    all_exist "$dest" && continue
    src_file=$(local_or_fetch "$MULTI30K_DIR/$name.$lang" "$MULTI30K_URL/$name.$lang.gz" "$OUT_DIR/download/$name.$lang" gz)
    dry_slice "$src_file" > "$dest"
  done
done
log "raw: $(wc -l < "$RAW/train.$SRC") train / $(wc -l < "$RAW/valid.$SRC") valid / $(wc -l < "$RAW/test.$SRC") test / $(wc -l < "$RAW/test1.$SRC") test1"

# 2. joint sentencepiece (learned on train, both sides) and encoding
spm_learn_encode "$OUT_DIR/spm" "$VOCAB_SIZE" "$SPM_TYPE" "$RAW/train.$SRC,$RAW/train.$TGT" \
  "$RAW" "$OUT_DIR/spm" train valid test test1 -- "$SRC" "$TGT"

# 3. binarize with one joined dictionary
if ! all_exist "$BIN_DIR/dict.$SRC.txt" "$BIN_DIR/test1.$SRC-$TGT.$TGT.idx"; then
  fairseq-preprocess --source-lang "$SRC" --target-lang "$TGT" --joined-dictionary \
    --trainpref "$OUT_DIR/spm/train" --validpref "$OUT_DIR/spm/valid" \
    --testpref "$OUT_DIR/spm/test,$OUT_DIR/spm/test1" --destdir "$BIN_DIR" --workers "$WORKERS"
fi
log "done: $BIN_DIR (dictionary $(wc -l < "$BIN_DIR/dict.$SRC.txt") types)"
