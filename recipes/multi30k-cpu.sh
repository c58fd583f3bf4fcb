#!/usr/bin/env bash
# The Multi30k en->de end-to-end run on a CPU: data -> verifier (averaged, exported with float16-number weights
# as the shipped pair's; also the distillation teacher) -> greedy distillation -> drafter and its sequential head ->
# SpecDec++ drafter (beam-5 distillation) -> latency/BLEU of every decoder on test2016 -> results table (markdown)
# and plot; meanwhile, on the second core, the double-token model and
# its same-size single-token baseline train, then are compared side by side (second table).
#   bash recipes/multi30k-cpu.sh                 # about 3.5 hours on 2 cores (2.5 with SPECDECPP_HOURS=0)
#   DOUBLE_TOKEN_ORDERS="bidirectional single_l2r single_r2l double_l2r double_r2l" bash recipes/multi30k-cpu.sh
#                                                # all of the double-token paper's systems (~55 min each)
#   DRY_RUN=1 OUT=../runs/dry/m30k bash recipes/multi30k-cpu.sh   # every stage on a tiny slice
#   MORE_SOURCES=2 bash recipes/multi30k-cpu.sh  # the drafter also learns the verifier's translations of 2 passes of
#                                                # substituted training sources (recipes/distill.sh; ~15 more minutes):
#                                                # what kept the demo drafter rising in its long fine-tunes
#   SPECDECPP_HOURS=0 bash recipes/multi30k-cpu.sh  # no SpecDec++ drafter (by default the drafter is fine-tuned on
#                                                # the verifier's beam-5 translations, ~1 more hour: specdec++ rows)
# Every stage is skipped when its output exists, so an interrupted run resumes.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
main() {
  . "$(dirname "$0")/lib/common.sh"
  need_fairseq
  # shellcheck source=lib/drafter_stages.sh
  . "$REPO/recipes/lib/drafter_stages.sh"
  OUT=${OUT:-$RUNS/multi30k}
  SRC=${SRC:-en}; TGT=${TGT:-de}
  VERIFIER_HOURS=${VERIFIER_HOURS:-1.25}       # wall-clock caps of the two trainings
  DRAFTER_HOURS=${DRAFTER_HOURS:-0.75}
  HEAD_UPDATES=${HEAD_UPDATES:-$([ "$DRY_RUN" = 1 ] && echo 20 || echo 3000)}  # the drafter's sequential head
                                               # (3,000: ~20 min on one core); 0: none
  SPECDECPP_HOURS=${SPECDECPP_HOURS:-0.9}     # the SpecDec++ drafter's fine-tune on beam-5 translations; 0: none
  MORE_SOURCES=${MORE_SOURCES:-0}              # passes of word-substituted training sources in the distillations
  NUM_AVG=${NUM_AVG:-5}                        # checkpoints averaged (verifier)
  DOUBLE_TOKEN=${DOUBLE_TOKEN:-1}              # 0: no double-token systems (recipes/double-token/train-multi30k.sh)
  DOUBLE_TOKEN_ORDERS=${DOUBLE_TOKEN_ORDERS:-bidirectional single_l2r}   # trained one after the other, 1 thread
  DOUBLE_TOKEN_EPOCHS=${DOUBLE_TOKEN_EPOCHS:-12}            # ~4.5 min each on one core (2 systems: ~110 min)
  MAX_SENTENCES=${MAX_SENTENCES:-0}            # latency on the first N test sentences (0: all 1,000)
  THREADS=${THREADS:-1}; DEVICE=cpu; FP16=0
  DECODERS=${DECODERS:-$("$PYTHON" -c "from fairseq_plugins.bench.decoders import default_decoders as d; print(d())"),oracle,bound}
  if [ "$DRY_RUN" = 1 ]; then NUM_AVG=2; fi
  # the averaged verifier exported with float16-number weights (as the shipped pair's): the teacher, the drafters'
  # verifier and the latency stage's; the plugin multiplies float16-number weights stored as float16
  VERIFIER=$OUT/verifier/verifier.pt DATA_BIN=$OUT/bin DATA_SPM=$OUT/spm   # lib/drafter_stages.sh's
  local averaged=$OUT/verifier/checkpoint_avg$NUM_AVG.pt
  local recipes=$REPO/recipes drafter=$OUT/drafter/checkpoint_best.pt results=$OUT/results/multi30k-test2016
  local with_head=$OUT/drafter/with_head.pt pp_drafter=$OUT/drafter-beam5/checkpoint_best.pt

  keep_dry_runs_apart "$OUT"
  log "1/6 data"
  OUT_DIR=$OUT bash "$recipes/data/prepare-multi30k.sh"
  local double_token_pid=""
  if [ "$DOUBLE_TOKEN" = 1 ]; then
    mkdir -p "$OUT/double-token"
    log "5/6 double-token systems ($DOUBLE_TOKEN_ORDERS): training in the background, log $OUT/double-token/train.log"
    double_token EVALUATE=0 > "$OUT/double-token/train.log" 2>&1 &
    double_token_pid=$!
    trap "kill_tree $double_token_pid" EXIT   # a failure below does not leave it running
  fi
  log "2/6 verifier (and teacher)"
  if ! all_exist "$averaged"; then
    SETTING=multi30k-verifier DATA=$OUT/bin SAVE_DIR=$OUT/verifier STOP_TIME_HOURS=$VERIFIER_HOURS \
      THREADS=$THREADS bash "$recipes/train-at.sh"
    SAVE_DIR=$OUT/verifier NUM_AVG=$NUM_AVG OUTPUT=$averaged bash "$recipes/average-checkpoints.sh"
  fi
  export_fp16 "$averaged" "$VERIFIER"
  log "3/6 distillation (greedy: what lossless SpecDec accepts)"
  distill "$OUT/distilled" 1
  log "4/6 drafter"
  if ! all_exist "$OUT/drafter/training.done"; then   # checkpoint_best.pt exists from the first validation on
    STOP_TIME_HOURS=$DRAFTER_HOURS train_drafter "$OUT/distilled/bin" "$OUT/drafter"
  fi
  if [ "$HEAD_UPDATES" != 0 ]; then
    log "4/6 the drafter's sequential head ($HEAD_UPDATES updates, the drafter frozen)"
    train_head "$OUT/distilled/bin" "$drafter" "$with_head"
  fi
  if [ "$SPECDECPP_HOURS" != 0 ]; then
    log "4/6 the SpecDec++ drafter: the drafter fine-tuned on the verifier's beam-5 translations"
    # the demo's drafter-beam5.pt's settings (checkpoints/README.md): no dropout, a warm-up longer than the run
    # (the rate stays 1e-4); the best by valid loss (it chose by SpecDec++'s valid BLEU instead)
    STOP_TIME_HOURS=$SPECDECPP_HOURS DROPOUT=0.0 WARMUP=10000 \
      specdecpp_drafter 5 "$drafter" "$OUT/drafter-beam5" "$OUT/drafter-beam5/training.done"
    DECODERS=$DECODERS,specdec++:drafter_path=$pp_drafter
  fi
  if [ "$HEAD_UPDATES" != 0 ]; then drafter=$with_head; fi   # the latency stage drafts through the head
  if [ -n "$double_token_pid" ]; then
    log "5/6 double-token systems: waiting for the training, then BLEU and tokens/s side by side"
    wait "$double_token_pid" || die "double-token training failed; see $OUT/double-token/train.log"
    double_token EVALUATE=1
  fi
  log "6/6 latency and BLEU of every decoder on test2016 (batch 1, $THREADS thread(s))"
  if ! all_exist "$results.md"; then
    DATA=$OUT/bin CHECKPOINT=$VERIFIER DRAFTER=$drafter DECODERS=$DECODERS SUBSET=test \
      REMOVE_BPE=sentencepiece THREADS=$THREADS MAX_SENTENCES=$MAX_SENTENCES OUT_PREFIX=$results PROFILE=1 \
      bash "$recipes/benchmark-latency.sh" --max-len-a 1.2 --max-len-b 10
  fi
  log "results: $results.md $results.png"
  cat "$results.md"
  if [ "$DOUBLE_TOKEN" = 1 ]; then log "double-token systems: $OUT/double-token/results.md"; cat "$OUT/double-token/results.md"; fi
}

# train_drafter DATA SAVE_DIR [OPTION...]: recipes/train-drafter.sh with the CPU preset (settings/multi30k-drafter.sh),
# initialised from the verifier (OPTIONs go to fairseq-train)
train_drafter() {
  SETTING=multi30k-drafter DATA=$1 SAVE_DIR=$2 VERIFIER=$VERIFIER THREADS=$THREADS \
    bash "$REPO/recipes/train-drafter.sh" "${@:3}"
  date > "$2/training.done"   # the stage is finished (a killed one resumes from its last save)
}

# double_token VAR=VALUE...: recipes/double-token/train-multi30k.sh on OUT/bin (orders already
# trained are skipped; the evaluation decodes all of test2016)
double_token() {
  env "$@" DATA="$OUT/bin" SAVE_ROOT="$OUT/double-token" ORDERS="$DOUBLE_TOKEN_ORDERS" \
    MAX_EPOCH="$DOUBLE_TOKEN_EPOCHS" THREADS=1 bash "$REPO/recipes/double-token/train-multi30k.sh"
}

main "$@"
exit
