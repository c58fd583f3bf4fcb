#!/usr/bin/env bash
# WMT14 en-de as in the SpecDec paper (5.1): ~4.5M pairs (Europarl v7 + CommonCrawl + News
# Commentary v9), Moses tokenization, 32K joint BPE (subword-nmt), newstest2013 valid,
# newstest2014 (full, 3,003) test; fairseq-preprocess with one joined dictionary.
#   bash recipes/data/prepare-wmt14-ende.sh
#   DRY_RUN=1 OUT_DIR=../runs/dry/wmt14 bash recipes/data/prepare-wmt14-ende.sh   # local slice, no network
# Local copies (used when present, else downloaded):
#   TRAIN_DIR/train.{en,de}             the concatenated training corpora (any cleaning is redone)
#   WMT_DIR/newstest201{3,4}.{en,de}    plain text (else: sacreBLEU's wmt13 / wmt14/full)
# Dry run: train = DRY_LINES lines of newstest2013, valid = the next 50, test = newstest2014's first 50.
set -euo pipefail
. "$(dirname "$0")/../lib/common.sh"

WMT_DIR=${WMT_DIR:-$REPO/../shared/data/wmt/en-de}
TRAIN_DIR=${TRAIN_DIR:-$WMT_DIR}
OUT_DIR=${OUT_DIR:-$RUNS/wmt14-ende}
SRC=${SRC:-en}; TGT=${TGT:-de}
STATMT=${STATMT:-http://www.statmt.org}
TRAIN_URLS=${TRAIN_URLS:-$STATMT/wmt13/training-parallel-europarl-v7.tgz $STATMT/wmt13/training-parallel-commoncrawl.tgz $STATMT/wmt14/training-parallel-nc-v9.tgz}
CORPORA=${CORPORA:-training/europarl-v7.de-en commoncrawl.de-en training/news-commentary-v9.de-en}
BPE_OPS=${BPE_OPS:-32000}
DRY_LINES=${DRY_LINES:-200}
if [ "$DRY_RUN" = 1 ]; then BPE_OPS=${DRY_BPE_OPS:-300}; fi
. "$REPO/recipes/lib/mt_pipeline.sh"
RAW=$OUT_DIR/raw DL=$OUT_DIR/download
mkdir -p "$RAW"

# 1. raw text
for lang in "$SRC" "$TGT"; do
  if ! all_exist "$RAW/valid.$lang"; then
    if [ -s "$WMT_DIR/newstest2013.$lang" ]; then dry_slice "$WMT_DIR/newstest2013.$lang" $((DRY_LINES + 1)) 50 > "$RAW/valid.$lang"
    else dry_need "$WMT_DIR/newstest2013.$lang"; sacrebleu_echo wmt13 "$SRC-$TGT" "$([ "$lang" = "$SRC" ] && echo src || echo ref)" > "$RAW/valid.$lang"; fi
  fi
  if ! all_exist "$RAW/test.$lang"; then
    if [ -s "$WMT_DIR/newstest2014.$lang" ]; then dry_slice "$WMT_DIR/newstest2014.$lang" 1 50 > "$RAW/test.$lang"
    else dry_need "$WMT_DIR/newstest2014.$lang"; sacrebleu_echo wmt14/full "$SRC-$TGT" "$([ "$lang" = "$SRC" ] && echo src || echo ref)" > "$RAW/test.$lang"; fi
  fi
done
if ! all_exist "$RAW/train.$SRC" "$RAW/train.$TGT"; then
  if [ -s "$TRAIN_DIR/train.$SRC" ] && [ -s "$TRAIN_DIR/train.$TGT" ]; then
    for lang in "$SRC" "$TGT"; do dry_slice "$TRAIN_DIR/train.$lang" > "$RAW/train.$lang"; done
  elif [ "$DRY_RUN" = 1 ]; then   # no training corpus here: a slice of newstest2013 stands in
    for lang in "$SRC" "$TGT"; do dry_need "$WMT_DIR/newstest2013.$lang"; dry_slice "$WMT_DIR/newstest2013.$lang" > "$RAW/train.$lang"; done
  else
    mkdir -p "$DL"
    for url in $TRAIN_URLS; do
      all_exist "$DL/$(basename "$url").done" && continue
      fetch "$url" "$DL/$(basename "$url")"
      tar -xzf "$DL/$(basename "$url")" -C "$DL" && touch "$DL/$(basename "$url").done"
    done
    for lang in "$SRC" "$TGT"; do
      for c in $CORPORA; do cat "$DL/$c.$lang"; done > "$RAW/train.$lang.tmp"
      mv "$RAW/train.$lang.tmp" "$RAW/train.$lang"
    done
  fi
fi
log "raw: $(wc -l < "$RAW/train.$SRC") train / $(wc -l < "$RAW/valid.$SRC") valid / $(wc -l < "$RAW/test.$SRC") test"

# 2-4. tokenize, clean, BPE, binarize
mt_pipeline train valid test
