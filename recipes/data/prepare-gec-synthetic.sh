#!/usr/bin/env bash
# Small GEC-style corpus: synthetic noise on clean English (Multi30k train, en side) -> clean.
#   bash recipes/data/prepare-gec-synthetic.sh
# train: COPIES noisy versions of Multi30k train.en (each with its own seed) -> train.en
# valid: noisy Multi30k val.en -> val.en
# test:  JFLEG dev (source .src -> target .ref0; all 4 references kept as raw/test.ref{0..3})
# Output (OUT_DIR): raw/{train,valid,test}.{src,tgt}, raw/test.ref*, spm/, bin/ (binarized data,
# (joined dictionary, languages src -> tgt). Stages whose outputs exist are skipped.
set -euo pipefail
. "$(dirname "$0")/../lib/common.sh"

MULTI30K_DIR=${MULTI30K_DIR:-$REPO/../shared/data/multi30k}   # needs raw/{train,val}.en
MULTI30K_URL=${MULTI30K_URL:-https://github.com/multi30k/dataset/raw/master/data/task1/raw}
JFLEG_DIR=${JFLEG_DIR:-$REPO/../shared/data/jfleg}           # needs dev/dev.{src,ref0..3}
JFLEG_URL=${JFLEG_URL:-https://raw.githubusercontent.com/keisks/jfleg/master}
OUT_DIR=${OUT_DIR:-$RUNS/gec}
BIN_DIR=${BIN_DIR:-$OUT_DIR/bin}
COPIES=${COPIES:-2}                  # noisy copies of the training set
SEED=${SEED:-1}
P_TOKEN=${P_TOKEN:-0.12}             # chance a token is corrupted
P_CLEAN=${P_CLEAN:-0.1}              # chance a sentence stays clean
VOCAB_SIZE=${VOCAB_SIZE:-8000}
SPM_TYPE=${SPM_TYPE:-unigram}
WORKERS=${WORKERS:-1}
DRY_LINES=${DRY_LINES:-200}
if [ "$DRY_RUN" = 1 ]; then VOCAB_SIZE=${DRY_VOCAB_SIZE:-300}; SPM_FLAGS=${SPM_FLAGS:---soft-vocab-limit}; fi
RAW=$OUT_DIR/raw
mkdir -p "$RAW"

# local copy, else download into OUT_DIR/download
get() { local_or_fetch "$1" "$2" "$OUT_DIR/download/$(basename "$1")" "${3:-}"; }
slice() { dry_slice "$1"; }
noise() { "$PYTHON" "$REPO/recipes/lib/gec_noise.py" --seed "$1" --p-token "$P_TOKEN" --p-clean "$P_CLEAN"; }

# 1. raw pairs
if ! all_exist "$RAW/train.src" "$RAW/train.tgt"; then
  train_en=$(get "$MULTI30K_DIR/raw/train.en" "$MULTI30K_URL/train.en.gz" gz)
  : > "$RAW/train.src.tmp"; : > "$RAW/train.tgt.tmp"
  for ((c = 0; c < COPIES; c++)); do
    slice "$train_en" | noise $((SEED + c)) >> "$RAW/train.src.tmp"
    slice "$train_en" | sed 's/^ *//; s/ *$//' >> "$RAW/train.tgt.tmp"
  done
  mv "$RAW/train.tgt.tmp" "$RAW/train.tgt"; mv "$RAW/train.src.tmp" "$RAW/train.src"
fi
if ! all_exist "$RAW/valid.src" "$RAW/valid.tgt"; then
  val_en=$(get "$MULTI30K_DIR/raw/val.en" "$MULTI30K_URL/val.en.gz" gz)
  slice "$val_en" | sed 's/^ *//; s/ *$//' > "$RAW/valid.tgt"
  slice "$val_en" | noise $((SEED + 1000)) > "$RAW/valid.src"
fi
if ! all_exist "$RAW/test.src" "$RAW/test.tgt" "$RAW/test.ref3"; then
  # JFLEG dev lines end with a space: strip it
  slice "$(get "$JFLEG_DIR/dev/dev.src" "$JFLEG_URL/dev/dev.src")" | sed 's/^ *//; s/ *$//' > "$RAW/test.src"
  for r in 0 1 2 3; do
    slice "$(get "$JFLEG_DIR/dev/dev.ref$r" "$JFLEG_URL/dev/dev.ref$r")" | sed 's/^ *//; s/ *$//' > "$RAW/test.ref$r"
  done
  cp "$RAW/test.ref0" "$RAW/test.tgt"
fi
log "raw: $(wc -l < "$RAW/train.src") train / $(wc -l < "$RAW/valid.src") valid / $(wc -l < "$RAW/test.src") test (JFLEG dev)"

# 2. joint sentencepiece on the training pairs (noisy + clean side)
spm_learn_encode "$OUT_DIR/spm" "$VOCAB_SIZE" "$SPM_TYPE" "$RAW/train.src,$RAW/train.tgt" \
  "$RAW" "$OUT_DIR/spm" train valid test -- src tgt

# 3. binarize (joined dictionary)
if ! all_exist "$BIN_DIR/dict.src.txt" "$BIN_DIR/test.src-tgt.tgt.bin"; then
  fairseq-preprocess --source-lang src --target-lang tgt --joined-dictionary \
    --trainpref "$OUT_DIR/spm/train" --validpref "$OUT_DIR/spm/valid" --testpref "$OUT_DIR/spm/test" \
    --destdir "$BIN_DIR" --workers "$WORKERS"
fi
log "done: $BIN_DIR (dictionary $(wc -l < "$BIN_DIR/dict.src.txt") types)"
