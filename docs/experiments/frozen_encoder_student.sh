#!/usr/bin/env bash
# Issue 12: a better verifier that the shipped drafter still fits. continued_verifier.sh's V2 (the demo verifier trained
# on, 37 valid BLEU against 28.6) changes the encoder, which the drafter shares and fingerprints, and its drafter had
# to start over (2.9 tokens per iteration). Here the demo verifier's decoder alone learns V2's greedy translations
# (Seq-KD from the stronger teacher), the encoder and the shared embeddings frozen (docs/experiments/seqkd_verifier.py),
# so the demo drafter stays valid for it; then the drafter is fine-tuned on the student's own greedy translations.
# Resumable (each step skipped when its output exists), on 2 cores, after continued_verifier.sh's steps 1-3:
#   RUNS=/work/runs bash docs/experiments/frozen_encoder_student.sh
# Steps, outputs under $RUNS/v3:
#   1. the decoder trained on V2's greedy translations of the 29,000 training sources and 113,558 substituted ones
#      ($RUNS/v2/greedy/bin), 2e-4 after 50 warm-up updates, one thread, a snapshot every 150 updates; stopped after
#      one epoch (617 updates: valid greedy BLEU 29.65, 29.31, 29.42, 29.38 at 150-600, the outputs shortening);
#   2. the uniform average of the snapshots at 150, 300 and 450 updates, exported --fp16: V3-fp16.pt;
#   3. its greedy translations of the same sources, two shards at a time;
#   4. the demo drafter fine-tuned on them, 5,400 updates on 2 threads (~1 h; it was stopped by hand there), the
#      uniform average of its checkpoints at 4,500-5,400 exported --fp16: D3.pt (the shipped demo pair since 2026-12-02);
#   5. one harness run per pair (the demo pair first) on test2016.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:?set RUNS}; W=$RUNS/v3; V2=$RUNS/v2
DEMO=$RUNS/previous-demo  # the demo pair this experiment started from (it replaced it on 2026-12-02)
# shellcheck source=docs/experiments/pair_steps.sh
source docs/experiments/pair_steps.sh
previous_demo_pair "$DEMO"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
DECODERS=beam1,specdec,specdec:length=fixed,specdec++,specdec++:beta=5,tau=3,drafter-only

# 1-2. the student verifier
if [ ! -s "$W/V3-fp16.pt" ]; then
  [ -s "$W/V3-u450.pt" ] || VERIFIER=$DEMO/verifier.pt SAVE_EVERY=150 python docs/experiments/seqkd_verifier.py "$V2/greedy/bin" "$W/V3.pt" 1 2e-4
  python -m fairseq_plugins.scripts.average_checkpoints --inputs "$W"/V3-u{150,300,450}.pt --output "$W/V3-avg3.pt"
  export_fp16 "$W/V3-avg3.pt" "$W/V3-fp16.pt"
fi

# 3. its greedy translations
distil_sources "$W/V3-fp16.pt" "$W/greedy" 1

# 4. the demo drafter, fine-tuned (the student's encoder is the demo verifier's: no rebasing)
finetune_drafter "$W/drafter" "$W/V3-fp16.pt" "$W/greedy/bin" "$DEMO/drafter.pt" 5400 "$W/D3.pt"

# 5. the harness, one run per pair
bench_pair "$W" demo "$DEMO/verifier.pt" "$DEMO/drafter.pt" "$DECODERS"
bench_pair "$W" v3 "$W/V3-fp16.pt" "$W/D3.pt" "$DECODERS"
