#!/usr/bin/env bash
# Sequence-level knowledge distillation (SpecDec 3.1/3.2): the teacher translates the
# training sources (greedy by default, see BEAM); the distilled corpus is binarized with the
# VERIFIER's dictionary, ready for the drafter and the verifier (shared teacher).
# DISTILL_VALID=1 (default): the valid targets are the teacher's translations too, so that the
# drafter's validation (spec_tokens_per_iter) measures acceptance against the teacher's output;
# the test split always keeps its references.
#   TEACHER=$RUNS/multi30k/verifier/checkpoint_avg5.pt RAW=$RUNS/multi30k/spm \
#   VERIFIER_DATA=$RUNS/multi30k/bin OUT=$RUNS/multi30k/distilled bash recipes/distill.sh
# Resumable: run the same command again after a kill (finished chunks are kept).
# Shards: NUM_SHARDS local processes, one GPU each when CUDA is visible.
set -euo pipefail
main() {
  . "$(dirname "$0")/lib/common.sh"
  need_fairseq

  # inputs / outputs
  TEACHER=${TEACHER:-$RUNS/multi30k/verifier/checkpoint_avg5.pt}   # multi30k-cpu.sh's; several: space separated (ensemble)
  VERIFIER_DATA=${VERIFIER_DATA:-$RUNS/multi30k/bin}            # has dict.$SRC.txt and dict.$TGT.txt
  # the teacher's dictionaries (its checkpoint saves a possibly relative data path: not used)
  TEACHER_DATA=${TEACHER_DATA:-$VERIFIER_DATA}
  TEACHER_USER_DIR=${TEACHER_USER_DIR:-}       # --user-dir of a teacher from another plugin
  RAW=${RAW:-$RUNS/multi30k/spm}          # preprocessed text: $RAW/$SPLIT.$SRC / .$TGT
  SRC=${SRC:-en}; TGT=${TGT:-de}
  TRAIN=${TRAIN:-train}; VALID=${VALID:-valid}; TEST=${TEST:-test}   # test keeps its references
  DISTILL_VALID=${DISTILL_VALID:-1}            # 1: valid targets = teacher translations; 0: references
  OUT=${OUT:-$RUNS/multi30k/distilled}   # writes $OUT/text and $OUT/bin
  # generation
  # BEAM=1: lossless SpecDec accepts exactly the verifier's greedy continuation, so a drafter
  # distilled from the verifier's greedy output learns what will be accepted. BEAM=5: the
  # paper's setting (and SpecDec++'s, whose relaxed acceptance is not the greedy output).
  BEAM=${BEAM:-1}; LENPEN=${LENPEN:-1.0}
  MAX_LEN_A=${MAX_LEN_A:-1.2}; MAX_LEN_B=${MAX_LEN_B:-10}
  MAX_SOURCE_LEN=${MAX_SOURCE_LEN:-}           # empty: the teacher's max source positions
  MAX_TOKENS=${MAX_TOKENS:-4096}; BATCH_SIZE=${BATCH_SIZE:-128}
  DEVICE=${DEVICE:-auto}                       # auto | cpu | cuda
  FP16=${FP16:-0}
  NUM_SHARDS=${NUM_SHARDS:-1}; CHUNK_SIZE=${CHUNK_SIZE:-1000}
  REFERENCE_FALLBACK=${REFERENCE_FALLBACK:-1}  # 1: untranslatable lines keep their reference; 0: empty
  WORKERS=${WORKERS:-1}                        # fairseq-preprocess workers
  # more sources: N passes of context-matched word substitutions over the training sources
  # (fairseq_plugins.scripts.augment_sources), translated by the teacher, binarized as train1 (fairseq-train
  # reads train and train1 together); 0: none. A drafter overfits its sources.
  MORE_SOURCES=${MORE_SOURCES:-0}

  local text=$OUT/text bin=$OUT/bin t
  mkdir -p "$text"
  for f in "$RAW/$TRAIN.$SRC" "$RAW/$TRAIN.$TGT" "$VERIFIER_DATA/dict.$SRC.txt" "$VERIFIER_DATA/dict.$TGT.txt" \
           "$TEACHER_DATA/dict.$SRC.txt" "$TEACHER_DATA/dict.$TGT.txt"; do
    [ -s "$f" ] || die "missing $f"
  done
  [[ "$MORE_SOURCES" =~ ^[0-9]+$ ]] || die "MORE_SOURCES must be a number of passes (0: none), not '$MORE_SOURCES'"
  read -r -a teachers <<< "$TEACHER"
  for t in "${teachers[@]}"; do [ -s "$t" ] || die "missing teacher checkpoint $t"; done

  # 1. teacher translations of the training set (skipped when done)
  distill_split "$TRAIN" "$text/$TRAIN.$TGT"
  cp "$RAW/$TRAIN.$SRC" "$text/$TRAIN.$SRC"
  local n_src n_tgt
  n_src=$(wc -l < "$text/$TRAIN.$SRC"); n_tgt=$(wc -l < "$text/$TRAIN.$TGT")
  [ "$n_src" = "$n_tgt" ] || die "distilled corpus is misaligned: $n_src source lines, $n_tgt target lines"

  # 1b. the teacher's translations of more sources (MORE_SOURCES)
  local more_prefix=$text/more-$MORE_SOURCES   # its .$TGT, when not empty, becomes train1
  if [ "$MORE_SOURCES" -gt 0 ]; then
    if ! all_exist "$more_prefix.$SRC"; then
      "$PYTHON" -m fairseq_plugins.scripts.augment_sources "$text/$TRAIN.$SRC" "$more_prefix.$SRC.part" \
        --copies "$MORE_SOURCES"
      mv "$more_prefix.$SRC.part" "$more_prefix.$SRC"
    fi
    if [ -s "$more_prefix.$SRC" ]; then
      distill_file "$more_prefix.$SRC" "$more_prefix.$TGT"
    else
      log "MORE_SOURCES: no word of the training sources has another word seen between its neighbours: no train1"
    fi
  fi

  # 2. test keeps its references; valid too unless DISTILL_VALID=1 (then: teacher translations)
  local split lang
  for split in "$VALID" "$TEST"; do
    for lang in "$SRC" "$TGT"; do
      if [ -s "$RAW/$split.$lang" ]; then cp "$RAW/$split.$lang" "$text/$split.$lang"; fi
    done
  done
  if [ "$DISTILL_VALID" = 1 ] && [ -s "$RAW/$VALID.$SRC" ]; then
    [ -s "$RAW/$VALID.$TGT" ] || die "missing $RAW/$VALID.$TGT"
    distill_split "$VALID" "$text/teacher.$VALID.$TGT"
    cp "$text/teacher.$VALID.$TGT" "$text/$VALID.$TGT"
  fi

  # 3. binarize with the verifier's dictionaries
  local -a prefs=(--trainpref "$text/$TRAIN")
  if [ -s "$text/$VALID.$SRC" ]; then prefs+=(--validpref "$text/$VALID"); fi
  if [ -s "$text/$TEST.$SRC" ]; then prefs+=(--testpref "$text/$TEST"); fi
  # into bin.part, renamed when whole: a binarization cut short (train1 missing) is never taken for the corpus
  local part=$bin.part
  rm -rf "$part"
  binarize "$part" "${prefs[@]}"
  if [ -s "$more_prefix.$TGT" ]; then
    binarize "$part/more" --trainpref "$more_prefix"
    for t in "$part"/more/train.*; do mv "$t" "$part/train1.${t##*/train.}"; done
    rm -rf "$part/more"
    log "more sources: $(wc -l < "$more_prefix.$TGT") training pairs as train1 in $bin"
  fi
  rm -rf "$bin"
  mv "$part" "$bin"
  log "distilled corpus: $bin ($n_tgt training pairs; untranslated lines: $text/$TRAIN.$TGT.report.tsv)"
}
# binarize DESTDIR PREF_OPTIONS...: fairseq-preprocess with the verifier's dictionaries
binarize() {
  local destdir=$1; shift
  fairseq-preprocess --source-lang "$SRC" --target-lang "$TGT" "$@" --destdir "$destdir" \
    --srcdict "$VERIFIER_DATA/dict.$SRC.txt" --tgtdict "$VERIFIER_DATA/dict.$TGT.txt" --workers "$WORKERS"
}
# distill_split SPLIT OUTPUT: the teacher's translations of $RAW/SPLIT.$SRC into OUTPUT, untranslatable lines
# keeping their reference with REFERENCE_FALLBACK=1
distill_split() {
  local reference=()
  if [ "$REFERENCE_FALLBACK" = 1 ]; then reference=(--reference "$RAW/$1.$TGT"); fi
  distill_file "$RAW/$1.$SRC" "$2" "${reference[@]}"
}
# distill_file INPUT OUTPUT [--reference REF]: the teacher's translations of INPUT into OUTPUT
# (skipped when OUTPUT exists; an interrupted run resumes its finished chunks)
distill_file() {
  local input=$1 output=$2; shift 2
  if all_exist "$output"; then log "distilled targets exist: $output"; return; fi
  local -a opts=(--input "$input" --output "$output" --data "$TEACHER_DATA"
    --beam "$BEAM" --lenpen "$LENPEN" --max-len-a "$MAX_LEN_A" --max-len-b "$MAX_LEN_B"
    --max-tokens "$MAX_TOKENS" --batch-size "$BATCH_SIZE" --device "$DEVICE"
    --num-shards "$NUM_SHARDS" --chunk-size "$CHUNK_SIZE" --teacher "${teachers[@]}")
  if [ -n "$TEACHER_USER_DIR" ]; then opts+=(--user-dir "$TEACHER_USER_DIR"); fi
  if [ -n "$MAX_SOURCE_LEN" ]; then opts+=(--max-source-len "$MAX_SOURCE_LEN"); fi
  if [ "$FP16" = 1 ]; then opts+=(--fp16); fi
  log "distilling $input with $TEACHER (beam $BEAM, $NUM_SHARDS shard(s))"
  "$PYTHON" -m fairseq_plugins.scripts.distill "${opts[@]}" "$@"
}
main "$@"
