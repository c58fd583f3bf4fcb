#!/usr/bin/env bash
# Raw parallel text -> fairseq binary data with an EXISTING sentencepiece model and dictionaries
# (those a trained verifier was built with; nothing is learned here).
#   SPM_MODEL=my/spm.model DICT_DIR=my/dicts RAW=my/raw SRC=en TGT=de OUT_DIR=runs/mine \
#     bash recipes/data/prepare-with-model.sh
# Inputs: RAW/{train,valid,test}.{SRC,TGT} raw (untokenized) text, the way the verifier's training
#   text was before sentencepiece; SPM_MODEL (or SRC_SPM/TGT_SPM, one model per language);
#   DICT_DIR/dict.{SRC,TGT}.txt (or SRC_DICT/TGT_DICT). More test sets: TEST_SPLITS="test test1"
#   (binarized as test, test1, ... in that order, fairseq's naming).
# Output (OUT_DIR): spm/{split}.{lang} encoded text, bin/ binarized with the given dictionaries;
#   DRY_RUN=1: raw/ with the first DRY_LINES lines of each file, encoded and binarized as above.
# Stops with one line naming what is missing, or when the model does not fit a dictionary
# (more than MAX_UNKNOWN of the pieces of 1,000 training lines unknown). Done stages are skipped.
set -euo pipefail
. "$(dirname "$0")/../lib/common.sh"
. "$REPO/recipes/lib/with_model.sh"

SRC=${SRC:-}; TGT=${TGT:-}
[ -n "$SRC" ] && [ -n "$TGT" ] || die "set SRC and TGT (the language suffixes of the files in RAW and DICT_DIR)"
with_model_settings                  # RAW, SPM_MODEL or SRC_SPM/TGT_SPM, DICT_DIR or SRC_DICT/TGT_DICT, TEST_SPLITS
OUT_DIR=${OUT_DIR:-$RUNS/$SRC$TGT-with-model}
BIN_DIR=${BIN_DIR:-$OUT_DIR/bin}
MAX_UNKNOWN=${MAX_UNKNOWN:-0.05}     # largest share of pieces missing from a dictionary
WORKERS=${WORKERS:-1}
DRY_LINES=${DRY_LINES:-200}
with_model_inputs
check_inputs "${WITH_MODEL_INPUTS[@]}"
splits=("${WITH_MODEL_SPLITS[@]}")
tests=("${splits[@]:2}")

if [ "${CHECK_FIT:-1}" = 1 ]; then with_model_check_fit; fi   # 0: the caller checked

# 1. DRY_RUN: a slice of every file
text=$RAW
if [ "$DRY_RUN" = 1 ]; then
  text=$OUT_DIR/raw
  mkdir -p "$text"
  for split in "${splits[@]}"; do for lang in "$SRC" "$TGT"; do
    all_exist "$text/$split.$lang" || dry_slice "$RAW/$split.$lang" > "$text/$split.$lang"
  done; done
fi

# 2. sentencepiece with the given model(s)
mkdir -p "$OUT_DIR/spm"
for split in "${splits[@]}"; do
  spm_encode "$SRC_SPM" "$text/$split.$SRC" "$OUT_DIR/spm/$split.$SRC"
  spm_encode "$TGT_SPM" "$text/$split.$TGT" "$OUT_DIR/spm/$split.$TGT"
done
log "encoded: $(wc -l < "$OUT_DIR/spm/train.$SRC") train / $(wc -l < "$OUT_DIR/spm/valid.$SRC") valid lines"

# 3. binarize with the given dictionaries (the target side of the last test set is written last)
if ! all_exist "$BIN_DIR/$WITH_MODEL_LAST_TEST.$SRC-$TGT.$TGT.idx"; then
  testprefs=""
  for split in "${tests[@]}"; do testprefs+="$OUT_DIR/spm/$split,"; done
  fairseq-preprocess --source-lang "$SRC" --target-lang "$TGT" \
    --srcdict "$SRC_DICT" --tgtdict "$TGT_DICT" \
    --trainpref "$OUT_DIR/spm/train" --validpref "$OUT_DIR/spm/valid" --testpref "${testprefs%,}" \
    --destdir "$BIN_DIR" --workers "$WORKERS"
fi
log "done: $BIN_DIR"
