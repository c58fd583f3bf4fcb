#!/usr/bin/env bash
# WMT16 en-ro (~610K pairs: Europarl v8 + SETIMES2), newsdev2016 valid, newstest2016 test.
# Romanian is normalised and stripped of diacritics (Sennrich et al. 2016; the preprocessing of
# Lee et al. 2018 / Mask-Predict that NAT work reports on); Moses tokenization; joint BPE
# (40K merges as Mask-Predict); fairseq-preprocess with one joined dictionary (serves ro->en too).
#   bash recipes/data/prepare-wmt16-enro.sh
#   DRY_RUN=1 OUT_DIR=../runs/dry/wmt16 bash recipes/data/prepare-wmt16-enro.sh   # local slice, no network
# Local copies (used when present, else downloaded):
#   TRAIN_DIR/train.{en,ro}                        concatenated training corpora
#   WMT_DIR/newsdev2016-enro.{en,ro}, WMT_DIR/newstest2016.{en,ro}   (else: sacreBLEU wmt16/dev, wmt16)
# raw/orig/{valid,test}.ro keep the untouched references (sacreBLEU with diacritics).
# Dry run: train = DRY_LINES lines of TRAIN_DIR/train (else of newsdev2016), valid = newsdev2016's
# lines DRY_LINES+1..DRY_LINES+50, test = newstest2016's first 50; nothing is downloaded.
set -euo pipefail
. "$(dirname "$0")/../lib/common.sh"

WMT_DIR=${WMT_DIR:-$REPO/../shared/data/wmt/en-ro}
TRAIN_DIR=${TRAIN_DIR:-$WMT_DIR}
OUT_DIR=${OUT_DIR:-$RUNS/wmt16-enro}
SRC=${SRC:-en}; TGT=${TGT:-ro}
EUROPARL_URL=${EUROPARL_URL:-http://data.statmt.org/wmt16/translation-task/training-parallel-ep-v8.tgz}
SETIMES_URL=${SETIMES_URL:-https://object.pouta.csc.fi/OPUS-SETIMES/v2/moses/en-ro.txt.zip}
RO_NORMALIZE=${RO_NORMALIZE:-1}      # 1: normalise + remove Romanian diacritics
BPE_OPS=${BPE_OPS:-40000}
DRY_LINES=${DRY_LINES:-200}
if [ "$DRY_RUN" = 1 ]; then BPE_OPS=${DRY_BPE_OPS:-300}; fi
. "$REPO/recipes/lib/mt_pipeline.sh"
RAW=$OUT_DIR/raw DL=$OUT_DIR/download
mkdir -p "$RAW/orig"
side() { [ "$1" = "$SRC" ] && echo src || echo ref; }
# 1. raw text (into raw/orig first)
for lang in "$SRC" "$TGT"; do
  if ! all_exist "$RAW/orig/valid.$lang"; then
    if [ -s "$WMT_DIR/newsdev2016-enro.$lang" ]; then dry_slice "$WMT_DIR/newsdev2016-enro.$lang" $((DRY_LINES + 1)) 50 > "$RAW/orig/valid.$lang"
    else dry_need "$WMT_DIR/newsdev2016-enro.$lang"; sacrebleu_echo wmt16/dev "$SRC-$TGT" "$(side "$lang")" > "$RAW/orig/valid.$lang"; fi
  fi
  if ! all_exist "$RAW/orig/test.$lang"; then
    if [ -s "$WMT_DIR/newstest2016.$lang" ]; then dry_slice "$WMT_DIR/newstest2016.$lang" 1 50 > "$RAW/orig/test.$lang"
    else dry_need "$WMT_DIR/newstest2016.$lang"; sacrebleu_echo wmt16 "$SRC-$TGT" "$(side "$lang")" > "$RAW/orig/test.$lang"; fi
  fi
done
if ! all_exist "$RAW/orig/train.$SRC" "$RAW/orig/train.$TGT"; then
  if [ -s "$TRAIN_DIR/train.$SRC" ] && [ -s "$TRAIN_DIR/train.$TGT" ]; then
    for lang in "$SRC" "$TGT"; do dry_slice "$TRAIN_DIR/train.$lang" > "$RAW/orig/train.$lang"; done
  elif [ "$DRY_RUN" = 1 ]; then   # no training corpus here: a slice of newsdev2016 stands in
    for lang in "$SRC" "$TGT"; do dry_need "$WMT_DIR/newsdev2016-enro.$lang"; done
    for lang in "$SRC" "$TGT"; do dry_slice "$WMT_DIR/newsdev2016-enro.$lang" > "$RAW/orig/train.$lang"; done
  else
    mkdir -p "$DL"
    all_exist "$DL/ep.done" || { fetch "$EUROPARL_URL" "$DL/ep.tgz" && tar -xzf "$DL/ep.tgz" -C "$DL" && touch "$DL/ep.done"; }
    all_exist "$DL/setimes.done" || { fetch "$SETIMES_URL" "$DL/setimes.zip" \
      && "$PYTHON" -m zipfile -e "$DL/setimes.zip" "$DL/setimes" && touch "$DL/setimes.done"; }
    for lang in "$SRC" "$TGT"; do
      cat "$DL"/training-parallel-ep-v8/europarl-v8.ro-en."$lang" "$DL"/setimes/SETIMES.en-ro."$lang" > "$RAW/orig/train.$lang.tmp"
      mv "$RAW/orig/train.$lang.tmp" "$RAW/orig/train.$lang"
    done
  fi
fi
# Romanian normalisation (any side that is ro); other languages copied
for split in train valid test; do for lang in "$SRC" "$TGT"; do
  all_exist "$RAW/$split.$lang" && continue
  if [ "$lang" = ro ] && [ "$RO_NORMALIZE" = 1 ]; then
    "$PYTHON" "$REPO/recipes/lib/text_tools.py" norm-ro --remove-diacritics < "$RAW/orig/$split.$lang" > "$RAW/$split.$lang.part"
    mv "$RAW/$split.$lang.part" "$RAW/$split.$lang"  # a stopped run leaves no half file taken as done
  else cp "$RAW/orig/$split.$lang" "$RAW/$split.$lang"; fi
done; done
log "raw: $(wc -l < "$RAW/train.$SRC") train / $(wc -l < "$RAW/valid.$SRC") valid / $(wc -l < "$RAW/test.$SRC") test"

# 2-4. tokenize, clean, BPE, binarize
mt_pipeline train valid test
