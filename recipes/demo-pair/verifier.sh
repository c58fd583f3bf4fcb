#!/usr/bin/env bash
# checkpoints/demo/verifier.pt: the earlier demo verifier's decoder taught by a stronger verifier, its encoder frozen
# so that drafters sharing that encoder still fit. ~2 h on 2 CPU cores; every step is skipped when its output exists.
#   bash recipes/demo-pair/data.sh && bash recipes/demo-pair/verifier.sh
# Steps, outputs under $RUNS/demo-pair/verifier:
#   1. the teacher: the earlier verifier trained 21 more epochs on the references (fresh Adam, inverse-sqrt from
#      3.8e-4, bfloat16 autocast), the average of its last 5 epochs exported --fp16: teacher.pt;
#   2. its greedy translations of the 29,000 training sources and of 113,558 word-substituted ones (4 passes);
#   3. the earlier verifier's decoder trained on them for one epoch (tools/train_verifier_decoder.py: lr 2e-4,
#      encoder and shared embeddings frozen, a snapshot every 150 updates);
#   4. the average of the snapshots at 150, 300 and 450 updates, exported --fp16: verifier.pt.
set -euo pipefail
. "$(dirname "$0")/steps.sh"
W=${OUT:-$WORK/verifier}
need_data
start_pair
mkdir -p "$W"

# 1. the teacher
if ! all_exist "$W/teacher.pt"; then
  CPU=1 THREADS=$THREADS TASK=speculative_translation SETTING=multi30k-verifier DATA=$DEMO_DATA/bin \
    SAVE_DIR=$W/teacher LR=3.8e-4 WARMUP=1360 WARMUP_INIT_LR=1e-4 MAX_EPOCH=21 KEEP_LAST_EPOCHS=5 EVAL_BLEU=1 \
    bash "$REPO/recipes/train-at.sh" --finetune-from-model "$START/verifier.pt" --cpu-autocast bf16
  SAVE_DIR=$W/teacher NUM_AVG=5 OUTPUT=$W/teacher/checkpoint_avg5.pt bash "$REPO/recipes/average-checkpoints.sh"
  export_fp16 "$W/teacher/checkpoint_avg5.pt" "$W/teacher.pt"
fi

# 2. its greedy translations
translations "$W/teacher.pt" "$W/teacher-greedy" 1 4

# 3-4. the student
if ! all_exist "$W/verifier.pt"; then
  all_exist "$W/student/verifier-u450.pt" || { mkdir -p "$W/student"; "$PYTHON" "$REPO/tools/train_verifier_decoder.py" \
    "$W/teacher-greedy/bin" "$W/student/verifier.pt" --verifier "$START/verifier.pt" --epochs 1 --lr 2e-4 \
    --save-every 150 --threads "$THREADS"; }
  "$PYTHON" -m fairseq_plugins.scripts.average_checkpoints --inputs "$W"/student/verifier-u{150,300,450}.pt \
    --output "$W/student/average.pt"
  export_fp16 "$W/student/average.pt" "$W/verifier.pt"
fi
log "done: $W/verifier.pt"
