#!/usr/bin/env bash
# checkpoints/demo/drafter.pt: the earlier demo drafter fine-tuned on the verifier's greedy translations, then given a
# sequential head trained alone. ~2 h on 2 CPU cores; every step is skipped when its output exists.
#   bash recipes/demo-pair/data.sh && bash recipes/demo-pair/drafter.sh
# VERIFIER: the verifier it drafts for (default checkpoints/demo/verifier.pt; verifier.sh's output is another
# encoder fingerprint, see recipes/demo-pair/README.md). Steps, outputs under $RUNS/demo-pair/drafter:
#   1. the verifier's greedy translations of the 29,000 training sources and 113,558 word-substituted ones;
#   2. the earlier demo drafter fine-tuned on them, 5,400 updates (2 threads, ~1 h), the uniform average of its
#      checkpoints at 4,500, 4,800, 5,100 and 5,400 updates exported --fp16: block.pt;
#   3. the verifier's greedy translations of the training sources and of 57,543 substituted ones (2 passes);
#   4. a sequential head trained on them, the block drafter frozen (6,000 updates, batch 64, lr 1e-3 falling to
#      1e-4; ~40 min on one core), exported --fp16: drafter.pt.
set -euo pipefail
. "$(dirname "$0")/steps.sh"
VERIFIER=${VERIFIER:-$DEMO/verifier.pt}
W=${OUT:-$WORK/drafter}
need_data
check_inputs "VERIFIER=$VERIFIER"
start_pair
mkdir -p "$W"

# 1-2. the block drafter
translations "$VERIFIER" "$W/greedy" 1 4
MAX_UPDATE=5400 SAVE_INTERVAL_UPDATES=300 finetune_drafter "$W/block" "$VERIFIER" "$W/greedy/bin" \
  "$START/drafter.pt" --validate-interval-updates 300
if ! all_exist "$W/block.pt"; then
  "$PYTHON" -m fairseq_plugins.scripts.average_checkpoints --inputs "$W/block" --num-update-checkpoints 4 \
    --checkpoint-upper-bound 5400 --output "$W/block/average.pt"
  export_fp16 "$W/block/average.pt" "$W/block.pt"
fi

# 3-4. its sequential head
translations "$VERIFIER" "$W/head-greedy" 1 2
all_exist "$W/head/drafter.pt" || { mkdir -p "$W/head"; "$PYTHON" -m fairseq_plugins.scripts.train_sequential_head \
  "$W/head-greedy/bin" --drafter "$W/block.pt" --save-to "$W/head/drafter.pt" --updates 6000 --batch-size 64 \
  --lr 1e-3 --threads "$THREADS" --cpu; }
export_fp16 "$W/head/drafter.pt" "$W/drafter.pt"
log "done: $W/drafter.pt"
