#!/usr/bin/env bash
# Translate a binarized split with stock fairseq-generate (beam or greedy); writes GEN for evaluate-bleu.sh.
#   CHECKPOINT=.../checkpoint_avg10.pt DATA=$RUNS/wmt14-ende/bin bash recipes/generate.sh
#   SETTING=wmt14-ende-verifier BEAM=1 bash recipes/generate.sh       # DATA/SAVE_DIR from the setting
# Plugin decoders: TASK=speculative_translation BEAM=1 and e.g. --decoding ... after the script name (they keep one
# hypothesis: a beam over 1 is refused).
# GEN_BATCH_SIZE / GEN_MAX_TOKENS size the batches (not the setting's training BATCH_SIZE / MAX_TOKENS).
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"
need_fairseq
SETTING=${SETTING:-}
load_setting
DATA=${DATA:?set DATA or SETTING}
SRC=${SRC:-en}; TGT=${TGT:-de}
SAVE_DIR=${SAVE_DIR:-$(dirname "$DATA")/checkpoints/at-$SRC$TGT}
CHECKPOINT=${CHECKPOINT:-$SAVE_DIR/checkpoint_avg${KEEP_LAST_EPOCHS:-10}.pt}   # average-checkpoints.sh's
SUBSET=${SUBSET:-test}
TASK=${TASK:-translation}
BEAM=${BEAM:-5}; LENPEN=${LENPEN:-1.0}
MAX_TOKENS=${GEN_MAX_TOKENS:-8000}; BATCH_SIZE=${GEN_BATCH_SIZE:-0}   # GEN_BATCH_SIZE=1: the paper's latency setting
REMOVE_BPE=${REMOVE_BPE:-${EVAL_BPE:-sentencepiece}}   # subword_nmt (@@ ) | sentencepiece; default: the setting's
                                                      # EVAL_BPE, as train-at.sh's BLEU (its default: sentencepiece)
CPU=${CPU:-0}; FP16=${FP16:-0}; THREADS=${THREADS:-1}
DRY_ARGS=()
if [ "$DRY_RUN" = 1 ]; then CPU=1; FP16=0; BEAM=${DRY_BEAM:-2}; DRY_ARGS=(--max-len-a 1 --max-len-b 5); fi
GEN=${GEN:-$(dirname "$CHECKPOINT")/gen-$SUBSET-beam$BEAM-$(basename "$CHECKPOINT" .pt).txt}
export OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS

args=("$DATA" --task "$TASK" --user-dir "$USER_DIR" --source-lang "$SRC" --target-lang "$TGT"
      --path "$CHECKPOINT" --gen-subset "$SUBSET" --beam "$BEAM" --lenpen "$LENPEN"
      --remove-bpe "$REMOVE_BPE" --max-tokens "$MAX_TOKENS")
if [ "$BATCH_SIZE" != 0 ]; then args+=(--batch-size "$BATCH_SIZE"); fi
if [ "$CPU" = 1 ]; then args+=(--cpu); elif [ "$FP16" = 1 ]; then args+=(--fp16); fi
log "fairseq-generate $SUBSET with $CHECKPOINT (beam $BEAM) -> $GEN"
fairseq-generate "${args[@]}" "${DRY_ARGS[@]}" "$@" > "$GEN.tmp"
mv "$GEN.tmp" "$GEN"
tail -n 1 "$GEN" >&2
echo "$GEN"
