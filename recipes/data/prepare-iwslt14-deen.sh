#!/usr/bin/env bash
# IWSLT14 de-en as fairseq's examples/translation/prepare-iwslt14.sh: Moses tokenization
# (no -a), lowercase, clean 1-175 ratio 1.5, valid = every 23rd line of the cleaned training
# data (7,283), test = dev2010+TEDX.dev2012+tst2010+tst2011+tst2012 in that order (6,750),
# joint BPE 10K merges; joined dictionary.
#   bash recipes/data/prepare-iwslt14-deen.sh
#   DRY_RUN=1 OUT_DIR=../runs/dry/iwslt14 bash recipes/data/prepare-iwslt14-deen.sh   # local slice, no network
# Local copy IWSLT_DIR (used when present, else IWSLT_URL is downloaded):
#   orig/de-en/train.tags.de-en.{de,en} + orig/de-en/IWSLT14.*.xml    the WIT3 release
#   iwslt14.tokenized.de-en/tmp/{valid,test}.{de,en}, .../code         fairseq's tokenized output
#     (this environment has only these valid/test files and code, no training set: a dry run
#      trains on a slice of tmp/valid, reusing the standard BPE code)
# Dry run: train = the first DRY_LINES lines of tmp/valid, valid = its next 50, test = tmp/test's
# first 50 (no tokenization: the text already is), BPE with the local code; nothing is downloaded.
set -euo pipefail
. "$(dirname "$0")/../lib/common.sh"

IWSLT_DIR=${IWSLT_DIR:-$REPO/../shared/data/iwslt14}
# WIT3 (wit3.fbk.eu, 2014-01 release) no longer serves the archive directly; fairseq's mirror of it:
IWSLT_URL=${IWSLT_URL:-https://dl.fbaipublicfiles.com/fairseq/data/iwslt14/de-en.tgz}
OUT_DIR=${OUT_DIR:-$RUNS/iwslt14-deen}
SRC=${SRC:-de}; TGT=${TGT:-en}
VALID_EVERY=${VALID_EVERY:-23}
TEST_SETS=${TEST_SETS:-IWSLT14.TED.dev2010 IWSLT14.TEDX.dev2012 IWSLT14.TED.tst2010 IWSLT14.TED.tst2011 IWSLT14.TED.tst2012}
BPE_OPS=${BPE_OPS:-10000}
LOWERCASE=${LOWERCASE:-1}; MOSES_AGGRESSIVE=${MOSES_AGGRESSIVE:-0}; CLEAN_MAX=${CLEAN_MAX:-175}
DRY_LINES=${DRY_LINES:-200}
TOKENIZED=$IWSLT_DIR/iwslt14.tokenized.de-en
if [ "$DRY_RUN" = 1 ]; then TOKENIZER=none; BPE_CODES=${BPE_CODES:-$TOKENIZED/code}; fi
. "$REPO/recipes/lib/mt_pipeline.sh"
RAW=$OUT_DIR/raw
mkdir -p "$RAW"
text_tools() { "$PYTHON" "$REPO/recipes/lib/text_tools.py" "$@"; }

# 1. raw text
if ! all_exist "$RAW/train.$SRC" "$RAW/train.$TGT" "$RAW/valid.$TGT" "$RAW/test.$TGT"; then
  if [ "$DRY_RUN" = 1 ]; then   # already tokenized + lowercased slices of the local copy
    for f in "$TOKENIZED"/tmp/{valid,test}."$SRC" "$TOKENIZED"/tmp/{valid,test}."$TGT" "$BPE_CODES"; do
      [ -s "$f" ] || die "dry run: local file $f is missing (dry runs do not download; set IWSLT_DIR)"
    done
    for lang in "$SRC" "$TGT"; do
      dry_slice "$TOKENIZED/tmp/valid.$lang" > "$RAW/train.$lang"
      dry_slice "$TOKENIZED/tmp/valid.$lang" $((DRY_LINES + 1)) 50 > "$RAW/valid.$lang"
      dry_slice "$TOKENIZED/tmp/test.$lang" 1 50 > "$RAW/test.$lang"
    done
  else
    orig=$IWSLT_DIR/orig/de-en
    if [ ! -s "$orig/train.tags.de-en.$SRC" ]; then
      mkdir -p "$OUT_DIR/download"; orig=$OUT_DIR/download/de-en
      [ -s "$orig/train.tags.de-en.$SRC" ] || { fetch "$IWSLT_URL" "$OUT_DIR/download/de-en.tgz" \
        && tar -xzf "$OUT_DIR/download/de-en.tgz" -C "$OUT_DIR/download"; }
    fi
    # as fairseq: tokenize, clean (train.tags), then every VALID_EVERY-th kept line is valid; the
    # tokenized splits go to tok/ (mt_pipeline skips them), the same lines untokenized to raw/
    mt_check_tokenizer
    mkdir -p "$OUT_DIR/tok"
    for lang in "$SRC" "$TGT"; do
      text_tools strip-tags < "$orig/train.tags.de-en.$lang" > "$RAW/all.$lang"
      mt_tokenize "$lang" < "$RAW/all.$lang" > "$RAW/all.tok.$lang"
      for t in $TEST_SETS; do text_tools xml-segs < "$orig/$t.de-en.$lang.xml"; done > "$RAW/test.$lang"
    done
    text_tools clean "$RAW/all.tok.$SRC" "$RAW/all.tok.$TGT" "$RAW/all.tok.clean.$SRC" "$RAW/all.tok.clean.$TGT" \
      --min "$CLEAN_MIN" --max "$CLEAN_MAX" --ratio "$CLEAN_RATIO" \
      --also "$RAW/all.$SRC" "$RAW/all.clean.$SRC" --also "$RAW/all.$TGT" "$RAW/all.clean.$TGT"
    split_valid() {  # IN DIR LANG: every VALID_EVERY-th line to DIR/valid.LANG, the others to DIR/train.LANG
      awk -v n="$VALID_EVERY" -v v="$2/valid.$3" -v t="$2/train.$3" '{ print > (NR % n == 0 ? v : t) }' "$1"
    }
    for lang in "$SRC" "$TGT"; do
      split_valid "$RAW/all.tok.clean.$lang" "$OUT_DIR/tok" "$lang"; split_valid "$RAW/all.clean.$lang" "$RAW" "$lang"
    done
    rm "$RAW"/all.*
  fi
fi
log "raw: $(wc -l < "$RAW/train.$SRC") train / $(wc -l < "$RAW/valid.$SRC") valid / $(wc -l < "$RAW/test.$SRC") test"

# 2-4. tokenize (+lowercase), clean, BPE, binarize
mt_pipeline train valid test
