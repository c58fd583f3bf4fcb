#!/usr/bin/env bash
# Bring your own model: a trained fairseq verifier (checkpoint, its sentencepiece model and its
# dictionaries) and raw parallel text -> SpecDec and SpecDec++ drafters and a latency table, in one command.
#   VERIFIER=my/checkpoint_best.pt SPM_MODEL=my/spm.model DICT_DIR=my/dicts RAW=my/raw SRC=en TGT=de \
#     OUT=runs/my-ende bash recipes/bring-your-own-model.sh
#   DRY_RUN=1 <same inputs> ...   # every stage on DRY_LINES (200) lines: a 1-layer drafter, 5 test sentences
# Inputs: RAW/{train,valid,test}.{SRC,TGT} raw text (as the verifier's text was before sentencepiece),
#   DICT_DIR/dict.{SRC,TGT}.txt; one model per language: SRC_SPM/TGT_SPM; more test sets: TEST_SPLITS.
# Stages, each skipped when its output exists (a rerun resumes):
#   1/6 RAW encoded with SPM_MODEL, binarized with the dictionaries -> OUT/data/bin   (data/prepare-with-model.sh)
#   2/6 distillation: the verifier translates the training sources and MORE_SOURCES passes of word-substituted
#       ones (DISTILL_BEAM 1: greedy, what lossless SpecDec accepts) -> OUT/distilled/bin
#   3/6 block drafter: the verifier's encoder, embeddings and sizes; DRAFTER_SETTING by its width (on a CPU: the
#       small one) -> OUT/drafter
#   4/6 sequential head (HEAD_UPDATES, 0: none): trained on the same distillation, the drafter frozen
#       -> OUT/drafter-head/drafter.pt
#   5/6 SpecDec++ drafter (SPECDEC_PP=1): the verifier's beam-PP_BEAM translations, the block drafter fine-tuned
#       on them -> OUT/drafter-beam/checkpoint_last.pt
#   6/6 latency / BLEU of every decoder on test, batch 1 -> OUT/results/latency-test.{md,png,json} (BENCH=0: none)
# Every missing input is named in ONE error line before anything runs. Variables of the stage scripts
# (MAX_UPDATE, STOP_TIME_HOURS, MAX_TOKENS, NGPUS, DECODERS, THREADS...) pass through; extra
# arguments go to the latency harness (e.g. --max-len-b 200).
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
main() {
  . "$(dirname "$0")/lib/common.sh"
  need_fairseq
  # shellcheck source=lib/with_model.sh
  . "$REPO/recipes/lib/with_model.sh"
  # shellcheck source=lib/drafter_stages.sh
  . "$REPO/recipes/lib/drafter_stages.sh"
  VERIFIER=${VERIFIER:-}
  SRC=${SRC:-}; TGT=${TGT:-}
  with_model_settings                     # RAW, SPM_MODEL, DICT_DIR (and their per-language forms), TEST_SPLITS
  OUT=${OUT:-$RUNS/byo-$SRC$TGT}
  DEVICE=${DEVICE:-auto}                  # auto | cpu | cuda (distillation, drafter, latency)
  FP16=${FP16:-auto}                      # auto: 1 on cuda, 0 on cpu
  DISTILL_BEAM=${DISTILL_BEAM:-1}         # 1: the verifier's greedy output, what the drafter has to guess
  DRAFTER_SETTING=${DRAFTER_SETTING:-auto}  # auto: small-drafter (embeddings < 512, or on a CPU) | paper-drafter-table7
  DRAFTER_ARCH=${DRAFTER_ARCH:-auto}      # auto: block_drafter_big (embeddings >= 1024) | block_drafter
  DRAFTER_CHECKPOINT=${DRAFTER_CHECKPOINT:-checkpoint_best.pt}   # of OUT/drafter (best: SpecDec tokens/iteration on valid)
  MORE_SOURCES=${MORE_SOURCES:-2}         # passes of word substitutions over the training sources (0: none)
  HEAD_UPDATES=${HEAD_UPDATES:-3000}      # a sequential head on the block drafter (stage 4); 0: none
  SPECDEC_PP=${SPECDEC_PP:-1}             # 1: a drafter for SpecDec++ from the verifier's beam search (stage 5)
  PP_BEAM=${PP_BEAM:-5}; PP_MAX_UPDATE=${PP_MAX_UPDATE:-3000}
  BENCH=${BENCH:-1}                       # 0: stop after the drafters (no latency stage)
  flag SPECDEC_PP BENCH
  if [ "$DRY_RUN" = 1 ]; then
    MORE_SOURCES=${DRY_MORE_SOURCES:-1}; HEAD_UPDATES=$((HEAD_UPDATES < 20 ? HEAD_UPDATES : 20))
  fi
  SUBSET=${SUBSET:-test}; BENCH_WARMUP=${BENCH_WARMUP:-10}; MAX_SENTENCES=${MAX_SENTENCES:-0}
  check_all_inputs
  absolute_paths
  read_verifier
  with_model_check_fit
  resolve_device
  choose_drafter
  keep_dry_runs_apart "$OUT"
  DATA_BIN=$OUT/data/bin DATA_SPM=$OUT/data/spm   # what the verifier distils (lib/drafter_stages.sh)
  local distilled=$OUT/distilled/bin drafter_dir=$OUT/drafter results=$OUT/results/latency-$SUBSET

  log "1/6 data: $RAW encoded with $SRC_SPM, binarized with $SRC_DICT / $TGT_DICT"
  OUT_DIR=$OUT/data BIN_DIR=$DATA_BIN CHECK_FIT=0 bash "$REPO/recipes/data/prepare-with-model.sh"
  log "2/6 distillation by the verifier (beam $DISTILL_BEAM, $MORE_SOURCES passes of more sources, $DEVICE)"
  distill "$OUT/distilled" "$DISTILL_BEAM"
  log "3/6 drafter ($DRAFTER_ARCH, $DRAFTER_SETTING settings) initialised from the verifier"
  if all_exist "$drafter_dir/training.done"; then log "drafter trained already: $drafter_dir"
  else train_drafter "$distilled" "$drafter_dir"; fi
  local block_drafter=$drafter_dir/$DRAFTER_CHECKPOINT
  local specdec_drafter=$block_drafter
  if [ "$HEAD_UPDATES" != 0 ]; then
    log "4/6 sequential head on the drafter ($HEAD_UPDATES updates)"
    specdec_drafter=$OUT/drafter-head/drafter.pt
    train_head "$distilled" "$block_drafter" "$specdec_drafter"
  else log "4/6 no sequential head (HEAD_UPDATES=0)"; fi
  local decoders=${DECODERS:-}
  if [ "$SPECDEC_PP" = 1 ]; then
    log "5/6 SpecDec++ drafter: the verifier's beam-$PP_BEAM translations, the drafter fine-tuned on them"
    MAX_UPDATE=$PP_MAX_UPDATE MAX_EPOCH=1000 WARMUP=$PP_MAX_UPDATE DRAFTER_CHECKPOINT=checkpoint_last.pt \
      specdecpp_drafter "$PP_BEAM" "$block_drafter" "$OUT/drafter-beam" "$OUT/drafter-beam/training.done"
    decoders=${decoders:-$(default_decoders "$OUT/drafter-beam/checkpoint_last.pt")}
  else log "5/6 no SpecDec++ drafter (SPECDEC_PP=0)"; decoders=${decoders:-$(default_decoders)}; fi
  if [ "$BENCH" = 0 ]; then log "6/6 no latency table (BENCH=0)"; return; fi
  log "6/6 latency and BLEU of every decoder on $SUBSET (batch 1, $DEVICE)"
  if all_exist "$results.md"; then log "latency table exists: $results.md"; cat "$results.md"
  else   # the harness prints the table
    SETTING="" DATA=$DATA_BIN CHECKPOINT=$VERIFIER DRAFTER=$specdec_drafter SUBSET=$SUBSET DECODERS=$decoders \
      REMOVE_BPE=sentencepiece DEVICE=$DEVICE FP16=$FP16 WARMUP=$BENCH_WARMUP MAX_SENTENCES=$MAX_SENTENCES \
      OUT_PREFIX=$results bash "$REPO/recipes/benchmark-latency.sh" "$@" > /dev/null
    if [ "$DRY_RUN" = 1 ]; then   # a first line saying what this table is not
      { printf '**Dry run** (%s lines, a tiny drafter): this table checks that the chain runs; its speeds and BLEU' \
          "${DRY_LINES:-200}"; printf ' say nothing of your model.\n\n'; cat "$results.md"; } > "$results.md.new"
      mv "$results.md.new" "$results.md"
    fi
  fi
  if [ "$DRY_RUN" = 1 ]; then
    log "results: $results.md $results.png"
    log "dry run done: every stage ran. The real run: the same command without DRY_RUN=1, with another OUT"
  else log "results: $results.md $results.png (rows: docs/benchmarks.md, How to read the tables)"; fi
}

# check_all_inputs: one line naming every missing input (checkpoint, model, dictionaries, raw files)
check_all_inputs() {
  local items=("VERIFIER=$VERIFIER")
  [ -n "$SRC" ] || items+=("SRC=")
  [ -n "$TGT" ] || items+=("TGT=")
  if [ -n "$SRC" ] && [ -n "$TGT" ]; then with_model_inputs; items+=("${WITH_MODEL_INPUTS[@]}"); fi
  check_inputs "${items[@]}"
}

# absolute_paths: the stages save some of these paths in checkpoints (the drafter's data, its verifier)
absolute_paths() {
  VERIFIER=$(abspath "$VERIFIER"); RAW=$(abspath "$RAW"); OUT=$(abspath "$OUT")
  SRC_SPM=$(abspath "$SRC_SPM"); TGT_SPM=$(abspath "$TGT_SPM")
  SRC_DICT=$(abspath "$SRC_DICT"); TGT_DICT=$(abspath "$TGT_DICT")
}

# read_verifier: VERIFIER_* (sizes, sharing, languages) from the checkpoint; checks the dictionaries' sizes
read_verifier() {
  local facts err
  err=$(mktemp)
  facts=$("$PYTHON" "$REPO/recipes/lib/verifier_info.py" "$VERIFIER" --src-dict "$SRC_DICT" \
    --tgt-dict "$TGT_DICT" 2> "$err") || { local msg; msg=$(tail -n 1 "$err"); rm -f "$err"; die "$msg"; }
  rm -f "$err"
  eval "$facts"
  if [ -n "$VERIFIER_SRC$VERIFIER_TGT" ] && [ "$VERIFIER_SRC-$VERIFIER_TGT" != "$SRC-$TGT" ]; then
    die "SRC=$SRC TGT=$TGT, but $VERIFIER translates $VERIFIER_SRC->$VERIFIER_TGT: set SRC=$VERIFIER_SRC" \
      "TGT=$VERIFIER_TGT (RAW's files and the dictionaries take those suffixes)"
  fi
  log "verifier: $VERIFIER_ARCH, $VERIFIER_ENC_LAYERS+$VERIFIER_DEC_LAYERS layers, dim $VERIFIER_EMBED_DIM," \
      "ffn $VERIFIER_FFN_DIM, $VERIFIER_HEADS heads, $VERIFIER_MPARAMS M parameters, shared embeddings: $VERIFIER_SHARE"
}

resolve_device() {
  if [ "$DRY_RUN" = 1 ]; then DEVICE=cpu; fi
  if [ "$DEVICE" = auto ]; then
    DEVICE=$("$PYTHON" -c 'import torch; print("cuda" if torch.cuda.is_available() else "cpu")')
  fi
  case $DEVICE in cpu | cuda) ;; *) die "DEVICE must be auto|cpu|cuda, not $DEVICE" ;; esac
  if [ "$FP16" = auto ]; then FP16=$([ "$DEVICE" = cuda ] && echo 1 || echo 0); fi
}

# choose_drafter: settings and arch by the verifier's width (the drafter takes its encoder and embeddings); on a
# CPU the small preset whatever the width (the paper's drafter, 300K updates of 128K tokens, is a GPU job)
choose_drafter() {
  local size=small
  if [ "$VERIFIER_EMBED_DIM" -ge 1024 ]; then size=big; elif [ "$VERIFIER_EMBED_DIM" -ge 512 ]; then size=base; fi
  if [ "$DRAFTER_SETTING" = auto ]; then
    DRAFTER_SETTING=paper-drafter-table7
    if [ "$size" = small ] || [ "$DEVICE" = cpu ]; then DRAFTER_SETTING=small-drafter; fi
  fi
  if [ "$DRAFTER_ARCH" = auto ]; then
    DRAFTER_ARCH=block_drafter; [ "$size" = big ] && DRAFTER_ARCH=block_drafter_big
  fi
  if [ "$size" = big ]; then BLOCK_SIZE=${BLOCK_SIZE:-30}; fi   # the paper's k for Transformer-big
  return 0
}

# train_drafter DATA SAVE_DIR [OPTION...]: recipes/train-drafter.sh with the verifier's sizes (OPTIONs go to
# fairseq-train); marks SAVE_DIR done
train_drafter() {
  local cpu=0; [ "$DEVICE" = cpu ] && cpu=1
  SETTING=$DRAFTER_SETTING ARCH=$DRAFTER_ARCH DATA=$1 SAVE_DIR=$2 VERIFIER=$VERIFIER SRC=$SRC TGT=$TGT \
    ENC_LAYERS=$VERIFIER_ENC_LAYERS EMBED_DIM=$VERIFIER_EMBED_DIM FFN_DIM=${FFN_DIM:-$VERIFIER_FFN_DIM} \
    HEADS=${HEADS:-$VERIFIER_HEADS} SHARE=$VERIFIER_SHARE DRY_EMBED_DIM=$VERIFIER_EMBED_DIM \
    DRY_FFN_DIM=$VERIFIER_FFN_DIM DRY_HEADS=$VERIFIER_HEADS CPU=$cpu FP16=$FP16 BLOCK_SIZE=${BLOCK_SIZE:-} \
    bash "$REPO/recipes/train-drafter.sh" "${@:3}"
  all_exist "$2/$DRAFTER_CHECKPOINT" || die "the drafter training wrote no $2/$DRAFTER_CHECKPOINT"
  date > "$2/training.done"
}

# default_decoders [PP_DRAFTER]: the table's rows, SpecDec++ on PP_DRAFTER (no SpecDec++ row without one)
default_decoders() {
  echo "beam1,greedy,beam5,specdec,specdec:head_candidates=0${1:+,specdec++:drafter_path=$1},iad,jacobi,oracle,bound"
}

main "$@"
exit
