#!/usr/bin/env bash
# checkpoints/demo/drafter-beam5.pt, SpecDec++'s drafter: the demo drafter's block (its sequential head dropped)
# fine-tuned on the verifier's beam-5 translations. SpecDec++'s relaxed acceptance lets the drafts change the output;
# a drafter that learned the verifier's greedy output has nothing better than greedy to offer, one that learned its
# beam search does. ~1.5 h on a CPU; every step is skipped when its output exists.
#   bash recipes/demo-pair/data.sh && bash recipes/demo-pair/drafter-beam5.sh
# VERIFIER, DRAFTER: the pair to start from (default checkpoints/demo's). Steps, outputs under
# $RUNS/demo-pair/drafter-beam5:
#   1. DRAFTER without its head: block.pt;
#   2. the verifier's beam-5 translations of the 29,000 training sources and 57,543 word-substituted ones (~30 min);
#   3. block.pt fine-tuned on them, 2,800 updates (validation by loss every 400), exported --fp16: drafter-beam5.pt.
set -euo pipefail
. "$(dirname "$0")/steps.sh"
VERIFIER=${VERIFIER:-$DEMO/verifier.pt}
DRAFTER=${DRAFTER:-$DEMO/drafter.pt}
W=${OUT:-$WORK/drafter-beam5}
need_data
check_inputs "VERIFIER=$VERIFIER" "DRAFTER=$DRAFTER"
mkdir -p "$W"

export_fp16 "$DRAFTER" "$W/block.pt" --drop-sequential-head
translations "$VERIFIER" "$W/beam5" 5 2
MAX_UPDATE=2800 SAVE_INTERVAL_UPDATES=400 KEEP_INTERVAL_UPDATES=20 SPEC_EVAL=0 finetune_drafter \
  "$W/finetune" "$VERIFIER" "$W/beam5/bin" "$W/block.pt" --validate-interval-updates 400
export_fp16 "$W/finetune/checkpoint_last.pt" "$W/drafter-beam5.pt"
log "done: $W/drafter-beam5.pt"
