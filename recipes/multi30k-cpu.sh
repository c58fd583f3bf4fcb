#!/usr/bin/env bash
# The Multi30k en->de end-to-end run on a CPU: data -> verifier (also the distillation
# teacher) -> greedy distillation -> drafter and its sequential head -> SpecDec++ drafter (beam-5 distillation) ->
# latency/BLEU of every decoder on test2016 ->
# results table (markdown) and plot; meanwhile, on the second core, the double-token model and
# its same-size single-token baseline train, then are compared side by side (second table).
#   bash recipes/multi30k-cpu.sh                 # about 3.5 hours on 2 cores (2.5 with SPECDECPP_HOURS=0)
#   DOUBLE_TOKEN_ORDERS="bidirectional single_l2r single_r2l double_l2r double_r2l" bash recipes/multi30k-cpu.sh
#                                                # all of the double-token paper's systems (~55 min each)
#   DRY_RUN=1 OUT=/tmp/m30k bash recipes/multi30k-cpu.sh   # every stage on a tiny slice
#   MORE_SOURCES=2 bash recipes/multi30k-cpu.sh  # the drafter also learns the verifier's translations of 2 passes of
#                                                # substituted training sources (recipes/distill.sh; ~15 more minutes):
#                                                # what kept the demo drafter rising in its long fine-tunes
#   SPECDECPP_HOURS=0 bash recipes/multi30k-cpu.sh  # no SpecDec++ drafter (by default the drafter is fine-tuned on
#                                                # the verifier's beam-5 translations, ~1 more hour: specdec++ rows)
# Every stage is skipped when its output exists, so an interrupted run resumes.
set -euo pipefail
main() {
  . "$(dirname "$0")/lib/common.sh"
  OUT=${OUT:-$RUNS/multi30k}
  VERIFIER_HOURS=${VERIFIER_HOURS:-1.25}       # wall-clock caps of the two trainings
  DRAFTER_HOURS=${DRAFTER_HOURS:-0.75}
  HEAD_UPDATES=${HEAD_UPDATES:-$([ "$DRY_RUN" = 1 ] && echo 20 || echo 3000)}  # the drafter's sequential head
                                               # (3,000: ~20 min on one core); 0: none
  SPECDECPP_HOURS=${SPECDECPP_HOURS:-0.9}     # the SpecDec++ drafter's fine-tune on beam-5 translations; 0: none
  NUM_AVG=${NUM_AVG:-5}                        # checkpoints averaged (verifier)
  DOUBLE_TOKEN=${DOUBLE_TOKEN:-1}              # 0: no double-token systems (recipes/double-token/train-multi30k.sh)
  DOUBLE_TOKEN_ORDERS=${DOUBLE_TOKEN_ORDERS:-bidirectional single_l2r}   # trained one after the other, 1 thread
  DOUBLE_TOKEN_EPOCHS=${DOUBLE_TOKEN_EPOCHS:-12}            # ~4.5 min each on one core (2 systems: ~110 min)
  MAX_SENTENCES=${MAX_SENTENCES:-0}            # latency on the first N test sentences (0: all 1,000)
  THREADS=${THREADS:-1}
  DECODERS=${DECODERS:-$("$PYTHON" -c "from fairseq_plugins.bench.decoders import default_decoders as d; print(d())"),oracle,bound}
  local recipes=$REPO/recipes verifier=$OUT/verifier/checkpoint_avg$NUM_AVG.pt
  local drafter=$OUT/drafter/checkpoint_best.pt results=$OUT/results/multi30k-test2016
  local with_head=$OUT/drafter/with_head.pt specdecpp_drafter=$OUT/drafter-beam5/checkpoint_best.pt
  if [ "$DRY_RUN" = 1 ]; then NUM_AVG=2; verifier=$OUT/verifier/checkpoint_avg2.pt; fi

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
  if ! all_exist "$verifier"; then
    SETTING=multi30k-verifier DATA=$OUT/bin SAVE_DIR=$OUT/verifier STOP_TIME_HOURS=$VERIFIER_HOURS \
      THREADS=$THREADS bash "$recipes/train-at.sh"
    SAVE_DIR=$OUT/verifier NUM_AVG=$NUM_AVG OUTPUT=$verifier bash "$recipes/average-checkpoints.sh"
  fi
  log "3/6 distillation (greedy: what lossless SpecDec accepts)"
  TEACHER=$verifier RAW=$OUT/spm VERIFIER_DATA=$OUT/bin OUT=$OUT/distilled DEVICE=cpu bash "$recipes/distill.sh"
  log "4/6 drafter"
  if ! all_exist "$drafter"; then
    SETTING=multi30k-drafter DATA=$OUT/distilled/bin SAVE_DIR=$OUT/drafter VERIFIER=$verifier \
      STOP_TIME_HOURS=$DRAFTER_HOURS THREADS=$THREADS bash "$recipes/train-drafter.sh"
  fi
  if [ "$HEAD_UPDATES" != 0 ]; then
    log "4/6 the drafter's sequential head ($HEAD_UPDATES updates, the drafter frozen)"
    if ! all_exist "$with_head"; then
      "$PYTHON" -m fairseq_plugins.scripts.train_sequential_head "$OUT/distilled/bin" --drafter "$drafter" \
        --save-to "$with_head" --updates "$HEAD_UPDATES" --threads "$THREADS"
    fi
  fi
  if [ "$SPECDECPP_HOURS" != 0 ]; then
    log "4/6 the SpecDec++ drafter: the drafter fine-tuned on the verifier's beam-5 translations"
    TEACHER=$verifier RAW=$OUT/spm VERIFIER_DATA=$OUT/bin OUT=$OUT/distilled-beam5 DEVICE=cpu BEAM=5 \
      bash "$recipes/distill.sh"
    if ! all_exist "$specdecpp_drafter"; then
      # the demo's drafter-beam5.pt's settings (checkpoints/README.md); the best by valid loss (it chose by
      # SpecDec++'s valid BLEU instead); spec_tokens_per_iter would count what lossless SpecDec accepts
      SETTING=multi30k-drafter DATA=$OUT/distilled-beam5/bin SAVE_DIR=$OUT/drafter-beam5 VERIFIER=$verifier \
        DROPOUT=0.0 LR=1e-4 WARMUP_INIT_LR=1e-4 WARMUP=10000 GLANCE_START=0.3 GLANCE_END=0.3 SPEC_EVAL=0 \
        STOP_TIME_HOURS=$SPECDECPP_HOURS THREADS=$THREADS bash "$recipes/train-drafter.sh" \
        --finetune-from-model "$drafter"
    fi
    DECODERS=$DECODERS,specdec++:drafter_path=$specdecpp_drafter
  fi
  if [ "$HEAD_UPDATES" != 0 ]; then drafter=$with_head; fi   # the latency stage drafts through the head
  if [ -n "$double_token_pid" ]; then
    log "5/6 double-token systems: waiting for the training, then BLEU and tokens/s side by side"
    wait "$double_token_pid" || die "double-token training failed; see $OUT/double-token/train.log"
    double_token EVALUATE=1
  fi
  log "6/6 latency and BLEU of every decoder on test2016 (batch 1, $THREADS thread(s))"
  if ! all_exist "$results.md"; then
    DATA=$OUT/bin CHECKPOINT=$verifier DRAFTER=$drafter DECODERS=$DECODERS SUBSET=test \
      REMOVE_BPE=sentencepiece THREADS=$THREADS MAX_SENTENCES=$MAX_SENTENCES OUT_PREFIX=$results PROFILE=1 \
      bash "$recipes/benchmark-latency.sh" --max-len-a 1.2 --max-len-b 10
  fi
  log "results: $results.md $results.png"
  cat "$results.md"
  if [ "$DOUBLE_TOKEN" = 1 ]; then log "double-token systems: $OUT/double-token/results.md"; cat "$OUT/double-token/results.md"; fi
}

# double_token VAR=VALUE...: recipes/double-token/train-multi30k.sh on OUT/bin (orders already
# trained are skipped; the evaluation decodes all of test2016)
double_token() {
  env "$@" DATA="$OUT/bin" SAVE_ROOT="$OUT/double-token" ORDERS="$DOUBLE_TOKEN_ORDERS" \
    MAX_EPOCH="$DOUBLE_TOKEN_EPOCHS" THREADS=1 bash "$REPO/recipes/double-token/train-multi30k.sh"
}

main "$@"
exit
