# Shared stages of the MT data recipes; source after common.sh, then call mt_pipeline.
# Input:  $OUT_DIR/raw/{split}.{$SRC,$TGT}  (plain text, one sentence per line; train = split "train")
# Output: $OUT_DIR/tok/    tokenized text (the references of tokenized BLEU)
#         $OUT_DIR/bpe/ or $OUT_DIR/spm/   subword codes/model and segmented text
#         $BIN_DIR (default $OUT_DIR/bin)  fairseq-preprocess with one joined dictionary
# Each stage is skipped when its outputs exist.
# shellcheck shell=bash
TOKENIZER=${TOKENIZER:-moses}       # moses (sacremoses, or perl scripts in $MOSES_SCRIPTS) | 13a | none
MOSES_SCRIPTS=${MOSES_SCRIPTS:-}    # optional mosesdecoder/scripts: the exact perl tokenizer fairseq's recipes use
MOSES_AGGRESSIVE=${MOSES_AGGRESSIVE:-1}  # moses -a: split intra-word hyphens (a @-@ b); WMT recipes use it
LOWERCASE=${LOWERCASE:-0}
CLEAN=${CLEAN:-1}                   # length/ratio filter on train (like clean-corpus-n.perl)
CLEAN_MIN=${CLEAN_MIN:-1}; CLEAN_MAX=${CLEAN_MAX:-250}; CLEAN_RATIO=${CLEAN_RATIO:-1.5}
SUBWORD=${SUBWORD:-subword-nmt}     # subword-nmt (joint BPE) | sentencepiece (joint, on raw text)
BPE_OPS=${BPE_OPS:-32000}           # subword-nmt merge operations
BPE_CODES=${BPE_CODES:-}            # reuse existing subword-nmt codes instead of learning them
VOCAB_SIZE=${VOCAB_SIZE:-32000}     # sentencepiece vocabulary
SPM_TYPE=${SPM_TYPE:-bpe}
WORKERS=${WORKERS:-4}
BIN_DIR=${BIN_DIR:-$OUT_DIR/bin}
text_tools() { "$PYTHON" "$REPO/recipes/lib/text_tools.py" "$@"; }

mt_tokenize() {  # LANG < in > out
  local lang=$1 opts=() agg=-a
  if [ "$LOWERCASE" = 1 ]; then opts+=(--lower); fi
  if [ "$MOSES_AGGRESSIVE" != 1 ]; then opts+=(--no-aggressive); agg=; fi
  if [ "$TOKENIZER" = moses ] && [ -n "$MOSES_SCRIPTS" ]; then
    perl "$MOSES_SCRIPTS/tokenizer/normalize-punctuation.perl" -l "$lang" \
      | perl "$MOSES_SCRIPTS/tokenizer/remove-non-printing-char.perl" \
      | perl "$MOSES_SCRIPTS/tokenizer/tokenizer.perl" -threads "$WORKERS" $agg -l "$lang" -no-escape -q \
      | if [ "$LOWERCASE" = 1 ]; then perl "$MOSES_SCRIPTS/tokenizer/lowercase.perl"; else cat; fi
  else
    text_tools tok --lang "$lang" --tool "$TOKENIZER" "${opts[@]}"
  fi
}

# moses needs sacremoses or $MOSES_SCRIPTS; a dry run falls back to sacrebleu's 13a tokenizer
mt_check_tokenizer() {
  [ "$TOKENIZER" = moses ] && [ -z "$MOSES_SCRIPTS" ] || return 0
  "$PYTHON" -c "import sacremoses" 2>/dev/null && return 0
  if [ "$DRY_RUN" = 1 ]; then log "sacremoses missing: dry run uses TOKENIZER=13a"; TOKENIZER=13a; return 0; fi
  die "TOKENIZER=moses needs 'pip install sacremoses' or MOSES_SCRIPTS=/path/to/mosesdecoder/scripts"
}

mt_pipeline() {
  local splits=("$@") split lang raw=$OUT_DIR/raw tok=$OUT_DIR/tok
  mt_check_tokenizer
  mkdir -p "$tok"
  # 1. tokenize (sentencepiece works on raw text: TOKENIZER=none just normalises spaces)
  for split in "${splits[@]}"; do for lang in "$SRC" "$TGT"; do
    all_exist "$tok/$split.$lang" && continue
    log "tokenize $split.$lang ($TOKENIZER)"
    mt_tokenize "$lang" < "$raw/$split.$lang" > "$tok/$split.$lang.tmp"
    mv "$tok/$split.$lang.tmp" "$tok/$split.$lang"
  done; done
  # 2. clean train
  if [ "$CLEAN" = 1 ] && ! all_exist "$tok/train.clean.$SRC" "$tok/train.clean.$TGT"; then
    text_tools clean "$tok/train.$SRC" "$tok/train.$TGT" "$tok/train.clean.$SRC.tmp" "$tok/train.clean.$TGT.tmp" \
      --min "$CLEAN_MIN" --max "$CLEAN_MAX" --ratio "$CLEAN_RATIO"
    mv "$tok/train.clean.$SRC.tmp" "$tok/train.clean.$SRC"; mv "$tok/train.clean.$TGT.tmp" "$tok/train.clean.$TGT"
  fi
  local train_name=train; [ "$CLEAN" = 1 ] && train_name=train.clean
  # 3. subwords (learned on train, both languages jointly)
  local sub
  case $SUBWORD in
    subword-nmt) sub=$OUT_DIR/bpe; mt_subword_nmt "$train_name" "${splits[@]}" ;;
    sentencepiece) sub=$OUT_DIR/spm
      spm_learn_encode "$sub" "$VOCAB_SIZE" "$SPM_TYPE" "$tok/$train_name.$SRC,$tok/$train_name.$TGT" \
        "$tok" "$sub" "$train_name" "${splits[@]:1}" -- "$SRC" "$TGT" ;;
    *) die "SUBWORD must be subword-nmt|sentencepiece" ;;
  esac
  # 4. binarize: train, valid, then every further split as test, test1, ...
  local last=${splits[-1]}
  if ! all_exist "$BIN_DIR/dict.$SRC.txt" "$BIN_DIR/$(mt_fairseq_name "$last" "${splits[@]}").$SRC-$TGT.$TGT.idx"; then
    local tests="" s
    for s in "${splits[@]:2}"; do tests+=${tests:+,}$sub/$s; done
    fairseq-preprocess --source-lang "$SRC" --target-lang "$TGT" --joined-dictionary \
      --trainpref "$sub/$train_name" --validpref "$sub/${splits[1]}" ${tests:+--testpref "$tests"} \
      --destdir "$BIN_DIR" --workers "$WORKERS"
  fi
  log "done: $BIN_DIR (joined dictionary $(wc -l < "$BIN_DIR/dict.$SRC.txt") types; splits ${splits[*]})"
}

# fairseq's name of the n-th split: train, valid, test, test1, test2, ...
mt_fairseq_name() {
  local want=$1 i=0 s; shift
  for s in "$@"; do
    if [ "$s" = "$want" ]; then
      case $i in 0) echo train ;; 1) echo valid ;; 2) echo test ;; *) echo "test$((i - 2))" ;; esac; return
    fi
    i=$((i + 1))
  done
}

mt_subword_nmt() {  # TRAIN_NAME SPLIT...
  local train_name=$1; shift
  local bpe=$OUT_DIR/bpe tok=$OUT_DIR/tok split lang
  mkdir -p "$bpe"
  if [ -n "$BPE_CODES" ]; then cp "$BPE_CODES" "$bpe/code"
  elif ! all_exist "$bpe/code"; then
    log "learning joint BPE ($BPE_OPS merges) on $train_name.{$SRC,$TGT}"
    cat "$tok/$train_name.$SRC" "$tok/$train_name.$TGT" | subword-nmt learn-bpe -s "$BPE_OPS" > "$bpe/code.tmp"
    mv "$bpe/code.tmp" "$bpe/code"
  fi
  for split in "$train_name" "${@:2}"; do for lang in "$SRC" "$TGT"; do
    all_exist "$bpe/$split.$lang" && continue
    subword-nmt apply-bpe -c "$bpe/code" --num-workers "$WORKERS" < "$tok/$split.$lang" > "$bpe/$split.$lang.tmp"
    mv "$bpe/$split.$lang.tmp" "$bpe/$split.$lang"
  done; done
}
