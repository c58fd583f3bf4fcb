#!/usr/bin/env bash
# GEC corpus: synthetic learner-like errors (recipes/lib/gec_noise.py) on every clean English text of the shared
# data (recipes/gec/clean_english.py: Multi30k, WMT news, IWSLT14 TED, SciTLDR, ASSET), noisy -> clean.
#   bash recipes/data/prepare-gec-synthetic.sh                # -> $RUNS/gec-synth/{raw,spm,bin}
#   DRY_RUN=1 DATA_DIR=tests/fixtures/gec OUT_DIR=$RUNS/gec-dry bash recipes/data/prepare-gec-synthetic.sh
# train: COPIES noisy versions of the clean sentences (each copy its own seed) -> the clean sentence
# valid: VALID_SIZE held-out clean sentences (never in train), noisy once
# test:  JFLEG dev (source -> ref0; the 4 references kept as raw/test.ref{0..3})
# test1: CoNLL-2013 (source -> annotator 0's correction; the gold edits stay in the .m2 for scoring)
# JFLEG and CoNLL-2013 lines are kept out of the training text. Output (OUT_DIR): raw/, spm/ (one
# sentencepiece model learned on the clean English), bin/ (joined dictionary, src -> tgt). Stages whose
# outputs exist are skipped.
set -euo pipefail
. "$(dirname "$0")/../lib/common.sh"

DATA_DIR=${DATA_DIR:-$REPO/../shared/data}
SOURCES=${SOURCES:-multi30k,wmt,iwslt14,scitldr,asset}   # clean_english.py's sources; their folders under DATA_DIR
JFLEG_DIR=${JFLEG_DIR:-$DATA_DIR/jfleg}                   # needs dev/dev.{src,ref0..3}
CONLL_M2=${CONLL_M2:-$DATA_DIR/conll2013/revised/official-preprocessed.m2}
OUT_DIR=${OUT_DIR:-$RUNS/gec-synth}
BIN_DIR=${BIN_DIR:-$OUT_DIR/bin}
COPIES=${COPIES:-3}                  # noisy copies of the training sentences
VALID_SIZE=${VALID_SIZE:-2000}
SEED=${SEED:-1}
P_TOKEN=${P_TOKEN:-0.08}             # mean errors per token of a noisy sentence
P_CLEAN=${P_CLEAN:-0.2}              # chance a sentence stays clean
VOCAB_SIZE=${VOCAB_SIZE:-8000}
SPM_TYPE=${SPM_TYPE:-unigram}
WORKERS=${WORKERS:-1}
if [ "$DRY_RUN" = 1 ]; then
  VOCAB_SIZE=${DRY_VOCAB_SIZE:-300}; SPM_FLAGS=${SPM_FLAGS:---soft-vocab-limit}; VALID_SIZE=${DRY_VALID_SIZE:-20}
fi
RAW=$OUT_DIR/raw
check_inputs "JFLEG_DIR=$JFLEG_DIR/dev/dev.src" "CONLL_M2=$CONLL_M2"
mkdir -p "$RAW"

strip() { sed 's/^ *//; s/ *$//' "$1"; }   # JFLEG dev lines end with a space
noise() { "$PYTHON" "$REPO/recipes/lib/gec_noise.py" --seed "$1" --p-token "$P_TOKEN" --p-clean "$P_CLEAN"; }

# 1. test sets (kept out of the training text below)
if ! all_exist "$RAW/test.src" "$RAW/test.ref3" "$RAW/test1.src" "$RAW/test1.tgt"; then
  strip "$JFLEG_DIR/dev/dev.src" | dry_slice /dev/stdin > "$RAW/test.src"
  for r in 0 1 2 3; do strip "$JFLEG_DIR/dev/dev.ref$r" | dry_slice /dev/stdin > "$RAW/test.ref$r"; done
  cp "$RAW/test.ref0" "$RAW/test.tgt"
  grep '^S ' "$CONLL_M2" | cut -c3- | dry_slice /dev/stdin > "$RAW/test1.src"
  "$PYTHON" -m fairseq_plugins.scripts.gec_score m2-target "$CONLL_M2" | dry_slice /dev/stdin > "$RAW/test1.tgt"
fi

# 2. clean English, held-out valid sentences
if ! all_exist "$RAW/clean.train" "$RAW/clean.valid"; then
  "$PYTHON" "$REPO/recipes/gec/clean_english.py" --data-dir "$DATA_DIR" --out-dir "$RAW" --sources "$SOURCES" \
    --valid-size "$VALID_SIZE" --seed "$SEED" \
    --exclude "$RAW/test.src" "$RAW"/test.ref? "$RAW/test1.src" "$RAW/test1.tgt"
fi

# 3. noisy -> clean pairs
if ! all_exist "$RAW/train.src" "$RAW/train.tgt"; then
  : > "$RAW/train.src.tmp"; : > "$RAW/train.tgt.tmp"
  for ((c = 0; c < COPIES; c++)); do
    dry_slice "$RAW/clean.train" | noise $((SEED + c)) >> "$RAW/train.src.tmp"
    dry_slice "$RAW/clean.train" >> "$RAW/train.tgt.tmp"
  done
  mv "$RAW/train.tgt.tmp" "$RAW/train.tgt"; mv "$RAW/train.src.tmp" "$RAW/train.src"
fi
if ! all_exist "$RAW/valid.src" "$RAW/valid.tgt"; then
  cp "$RAW/clean.valid" "$RAW/valid.tgt"
  noise $((SEED + 1000)) < "$RAW/clean.valid" > "$RAW/valid.src"
fi
log "raw: $(wc -l < "$RAW/train.src") train ($COPIES noisy copies of $(wc -l < "$RAW/clean.train") sentences:" \
    "$(sed 's/\t/ /' "$RAW/clean.sources" | paste -sd, - | sed 's/,/, /g')) / $(wc -l < "$RAW/valid.src") valid / $(wc -l < "$RAW/test.src")" \
    "test (JFLEG dev) / $(wc -l < "$RAW/test1.src") test1 (CoNLL-2013)"

# 4. one sentencepiece model on the clean English, shared by both sides
spm_learn_encode "$OUT_DIR/spm" "$VOCAB_SIZE" "$SPM_TYPE" "$RAW/clean.train" \
  "$RAW" "$OUT_DIR/spm" train valid test test1 -- src tgt

# 5. binarize (joined dictionary)
if ! all_exist "$BIN_DIR/dict.src.txt" "$BIN_DIR/test1.src-tgt.tgt.idx"; then
  fairseq-preprocess --source-lang src --target-lang tgt --joined-dictionary \
    --trainpref "$OUT_DIR/spm/train" --validpref "$OUT_DIR/spm/valid" \
    --testpref "$OUT_DIR/spm/test,$OUT_DIR/spm/test1" --destdir "$BIN_DIR" --workers "$WORKERS"
fi
log "done: $BIN_DIR (dictionary $(wc -l < "$BIN_DIR/dict.src.txt") types)"
