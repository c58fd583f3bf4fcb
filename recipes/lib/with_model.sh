# Inputs of a run on a given sentencepiece model and dictionaries (data/prepare-with-model.sh,
# bring-your-own-model.sh); source it after common.sh, with SRC and TGT set.
# shellcheck shell=bash disable=SC2034

# with_model_settings: defaults of SPM_MODEL, SRC_SPM/TGT_SPM (one model per language), DICT_DIR,
# SRC_DICT/TGT_DICT, RAW and TEST_SPLITS (test sets: binarized as test, test1, ... in this order)
with_model_settings() {
  RAW=${RAW:-}; SPM_MODEL=${SPM_MODEL:-}; DICT_DIR=${DICT_DIR:-}
  SRC_SPM=${SRC_SPM:-$SPM_MODEL}; TGT_SPM=${TGT_SPM:-$SPM_MODEL}
  SRC_DICT=${SRC_DICT:-${DICT_DIR:+$DICT_DIR/dict.$SRC.txt}}
  TGT_DICT=${TGT_DICT:-${DICT_DIR:+$DICT_DIR/dict.$TGT.txt}}
  TEST_SPLITS=${TEST_SPLITS:-test}
  read -r -a WITH_MODEL_SPLITS <<< "train valid $TEST_SPLITS"
  local tests=$((${#WITH_MODEL_SPLITS[@]} - 2))
  WITH_MODEL_LAST_TEST=test   # fairseq-preprocess's name of the last test set (binarized last)
  if [ "$tests" -gt 1 ]; then WITH_MODEL_LAST_TEST=test$((tests - 1)); fi
}

# with_model_inputs: WITH_MODEL_INPUTS, the NAME=FILE items of check_inputs (named as the user set them)
with_model_inputs() {
  local split lang
  if [ "$SRC_SPM" = "$TGT_SPM" ]; then WITH_MODEL_INPUTS=("SPM_MODEL=$SRC_SPM")
  else WITH_MODEL_INPUTS=("SRC_SPM=$SRC_SPM" "TGT_SPM=$TGT_SPM"); fi
  if [ -n "$SRC_DICT$TGT_DICT" ]; then
    WITH_MODEL_INPUTS+=("${DICT_DIR:+DICT_DIR/}dict.$SRC.txt=$SRC_DICT" "${DICT_DIR:+DICT_DIR/}dict.$TGT.txt=$TGT_DICT")
  else WITH_MODEL_INPUTS+=("DICT_DIR="); fi
  if [ -z "$RAW" ]; then WITH_MODEL_INPUTS+=("RAW="); return; fi
  local missing=0
  for split in "${WITH_MODEL_SPLITS[@]}"; do for lang in "$SRC" "$TGT"; do
    WITH_MODEL_INPUTS+=("RAW/$split.$lang=$RAW/$split.$lang")
    [ -s "$RAW/$split.$lang" ] || missing=1
  done; done
  if [ "$missing" = 1 ] && [ -d "$RAW" ]; then
    local file listed="" count=0
    for file in "$RAW"/*; do
      [ -e "$file" ] || continue   # an empty folder's unmatched glob
      count=$((count + 1))
      if [ "$count" -le 8 ]; then listed+=" ${file##*/}"; fi
    done
    if [ "$count" -gt 8 ]; then listed+=" ..."; fi
    INPUTS_HINT=" (RAW holds:${listed:- nothing}; it needs {$(IFS=,; echo "${WITH_MODEL_SPLITS[*]}")}.{$SRC,$TGT}: \
line-aligned text as it was before sentencepiece, not tokenized)"
  fi
}

# with_model_check_fit: dies with one line when a sentencepiece model does not fit its dictionary
# (more than MAX_UNKNOWN of the pieces of the first 1,000 training lines missing from it)
with_model_check_fit() {
  local lang model dict msg
  for lang in "$SRC" "$TGT"; do
    model=$SRC_SPM; dict=$SRC_DICT
    if [ "$lang" = "$TGT" ]; then model=$TGT_SPM; dict=$TGT_DICT; fi
    msg=$("$PYTHON" "$REPO/recipes/lib/spm.py" check --model "$model" --dict "$dict" --input "$RAW/train.$lang" \
      --max-unknown "${MAX_UNKNOWN:-0.05}" 2>&1) || die "$msg"
    log "$msg"
  done
}
