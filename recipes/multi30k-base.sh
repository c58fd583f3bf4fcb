#!/usr/bin/env bash
# The Multi30k en->de pair at the SpecDec paper's verifier size, end to end; rerun the same command after a stop
# (the verifier resumes from its last save, every finished stage is skipped):
#   1/5 data: recipes/data/prepare-multi30k.sh into DATA_DIR (the one recipes/multi30k-cpu.sh uses)
#   2/5 verifier: Transformer-base, 6+6 x 512 (recipes/settings/multi30k-base-verifier.sh), 30 epochs
#   3/5 its last NUM_AVG epochs averaged and exported with float16-number weights -> OUT/pair/verifier.pt
#   4/5 bring-your-own-model.sh's drafters for it: the block drafter on its greedy distillation (with MORE_SOURCES
#       passes of word-substituted sources), its sequential head, SpecDec++'s drafter fine-tuned on beam-5
#       translations (SPECDEC_PP=0: none) -> OUT/pair/drafter.pt and OUT/pair/drafter-beam5.pt (float16-number
#       weights), beside the sentencepiece model and dictionaries: OUT/pair is laid out as checkpoints/demo
#   5/5 the latency tables: recipes/benchmark-demo.sh on OUT/pair, every row side by side on test2016 at batch 1
#       and 32, one thread -> DOC (docs/benchmarks.md), sections base-cpu-b1 and base-cpu-b32
#   bash recipes/multi30k-base.sh                # one CPU core with AMX: ~16 h, the verifier 5-7 h (10-14 min an
#                                                # epoch); without AMX (AVX512-BF16) 20-25 min an epoch
#   DEVICE=cuda bash recipes/multi30k-base.sh    # trains on a GPU (float16; the paper's 6-layer drafter), times on CPU
#   DRY_RUN=1 OUT=../runs/dry/base bash recipes/multi30k-base.sh   # every stage on a tiny slice and tiny models
# Extra arguments go to the latency harness (e.g. --device cuda, with SECTION_PREFIX=base-gpu).
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
main() {
  . "$(dirname "$0")/lib/common.sh"
  OUT=${OUT:-$RUNS/multi30k-base}
  DATA_DIR=${DATA_DIR:-$([ "$DRY_RUN" = 1 ] && echo "$OUT/data" || echo "$RUNS/multi30k")}
  DEVICE=${DEVICE:-cpu}                   # cpu | cuda: where the models train
  NUM_AVG=${NUM_AVG:-5}; [ "$DRY_RUN" = 1 ] && NUM_AVG=2
  DRAFTER_SETTING=${DRAFTER_SETTING:-$([ "$DEVICE" = cuda ] && echo paper-drafter-table7 || echo small-drafter)}
  # the block drafter's updates (0: its setting's epochs). On one core of a CPU with bfloat16 kernels it trains
  # ~0.4 updates/s at this size (~0.17 in float32) and an epoch of the distillation (3 x 29k pairs) is ~400 updates:
  # 4,000 updates take ~3 h, 40 epochs ~12 h
  DRAFTER_MAX_UPDATE=${DRAFTER_MAX_UPDATE:-$([ "$DEVICE" = cuda ] && echo 0 || echo 4000)}
  SHARE_ENCODER=${SHARE_ENCODER:-1}       # the drafter reads the verifier's encoder output (frozen, one encoder pass a
                                          # sentence; what CUDA graphs need), also with the paper's setting (0: its own)
  SPECDEC_PP=${SPECDEC_PP:-1}             # 0: no SpecDec++ drafter (and no specdec++ row)
  BATCH_SIZES=${BATCH_SIZES:-1 32}; TEST_SPLITS=${TEST_SPLITS:-test}
  SECTION_PREFIX=${SECTION_PREFIX:-base-cpu}
  DOC=${DOC:-$([ "$DRY_RUN" = 1 ] && echo "$OUT/benchmarks.md" || echo "$REPO/docs/benchmarks.md")}
  case $DEVICE in cpu | cuda) ;; *) die "DEVICE must be cpu or cuda, not $DEVICE" ;; esac
  need_fairseq
  OUT=$(abspath "$OUT"); DATA_DIR=$(abspath "$DATA_DIR")
  keep_dry_runs_apart "$OUT"
  local pair=$OUT/pair byo=$OUT/byo

  log "1/5 data -> $DATA_DIR"
  OUT_DIR=$DATA_DIR bash "$REPO/recipes/data/prepare-multi30k.sh"
  log "2/5 Transformer-base verifier ($DEVICE) -> $OUT/verifier"
  if all_exist "$pair/verifier.pt"; then log "verifier exported already: $pair/verifier.pt"
  else train_verifier "$OUT/verifier" "$pair/verifier.pt"; fi
  log "4/5 drafters ($DRAFTER_SETTING) by recipes/bring-your-own-model.sh -> $byo, $pair"
  local drafters=("$pair/drafter.pt"); [ "$SPECDEC_PP" = 0 ] || drafters+=("$pair/drafter-beam5.pt")
  if all_exist "${drafters[@]}"; then log "drafters exported already: $pair"
  else train_drafters "$pair" "$byo"; fi
  log "5/5 latency tables -> $DOC (sections $SECTION_PREFIX-b*)"
  DEMO=$pair MULTI30K_DIR=$DATA_DIR/raw OUT_DIR=$OUT/benchmark BATCH_SIZES=$BATCH_SIZES TEST_SPLITS=$TEST_SPLITS \
    SECTION_PREFIX=$SECTION_PREFIX DOC=$DOC bash "$REPO/recipes/benchmark-demo.sh" "$@" > /dev/null
  log "done: $pair, $DOC"
}

# train_verifier SAVE_DIR EXPORT: the verifier (resumes from SAVE_DIR's last save), its average, the export
train_verifier() {
  local cpu=1 fp16=0 avg=$1/checkpoint_avg$NUM_AVG.pt
  [ "$DEVICE" = cuda ] && { cpu=0; fp16=1; }
  SETTING=multi30k-base-verifier DATA=$DATA_DIR/bin SAVE_DIR=$1 CPU=$cpu FP16=$fp16 bash "$REPO/recipes/train-at.sh"
  training_finished "$1/checkpoint_last.pt" \
    || { log "the verifier stopped before its last epoch (STOP_TIME_HOURS?): run the same command again"; exit 0; }
  log "3/5 its last $NUM_AVG epochs averaged, float16-number weights -> $2"
  SAVE_DIR=$1 NUM_AVG=$NUM_AVG OUTPUT=$avg bash "$REPO/recipes/average-checkpoints.sh"
  mkdir -p "$(dirname "$2")"
  "$PYTHON" -m fairseq_plugins.scripts.export_checkpoint "$avg" "$2" --fp16
}

# training_finished CHECKPOINT: whether fairseq-train ran past its last epoch or update (not stopped by time)
training_finished() {
  "$PYTHON" - "$1" << 'EOF'
import sys
import torch
state = torch.load(sys.argv[1], map_location="cpu", weights_only=False)
limits, epoch = state["cfg"]["optimization"], state["extra_state"]["train_iterator"]["epoch"]
updates = state["optimizer_history"][-1]["num_updates"]
sys.exit(0 if 0 < limits["max_epoch"] < epoch or 0 < limits["max_update"] <= updates else 1)
EOF
}

# train_drafters PAIR BYO_OUT: bring-your-own-model.sh's stages 1-5 on PAIR/verifier.pt, then PAIR laid out as
# checkpoints/demo (the drafters exported with float16-number weights, the sentencepiece model, the dictionaries)
train_drafters() {
  local pair=$1 byo=$2
  VERIFIER=$pair/verifier.pt SPM_MODEL=$DATA_DIR/spm/spm.model DICT_DIR=$DATA_DIR/bin RAW=$DATA_DIR/raw \
    SRC=en TGT=de OUT=$byo DEVICE=$DEVICE DRAFTER_SETTING=$DRAFTER_SETTING BENCH=0 MAX_UPDATE=$DRAFTER_MAX_UPDATE \
    SHARE_ENCODER=$SHARE_ENCODER SPECDEC_PP=$SPECDEC_PP \
    SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-250} KEEP_INTERVAL_UPDATES=${KEEP_INTERVAL_UPDATES:-2} \
    bash "$REPO/recipes/bring-your-own-model.sh"
  local drafter=$byo/drafter-head/drafter.pt
  [ "${HEAD_UPDATES:-1}" = 0 ] && drafter=$byo/drafter/${DRAFTER_CHECKPOINT:-checkpoint_best.pt}
  cp "$DATA_DIR/spm/spm.model" "$pair/sentencepiece.model"
  cp "$DATA_DIR/bin/dict.en.txt" "$DATA_DIR/bin/dict.de.txt" "$pair/"
  [ "$SPECDEC_PP" = 0 ] || "$PYTHON" -m fairseq_plugins.scripts.export_checkpoint \
    "$byo/drafter-beam/checkpoint_last.pt" "$pair/drafter-beam5.pt" --fp16
  "$PYTHON" -m fairseq_plugins.scripts.export_checkpoint "$drafter" "$pair/drafter.pt" --fp16  # last: the pair is whole
}

main "$@"
exit
