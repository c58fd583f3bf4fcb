#!/usr/bin/env bash
# Issue 12: the shipped verifier (frozen_encoder_student.sh's V3) learned V2's *greedy* translations. Does learning
# V2's *beam-5* translations (Kim & Rush's Seq-KD; on 2026-12-01 a verifier trained on beam-5 output drafted 4.17
# tokens per iteration against 3.73) make its greedy output easier still to draft, without losing BLEU?
# The encoder and shared embeddings stay frozen (docs/experiments/seqkd_verifier.py), so the demo drafter still fits.
# Resumable (each step skipped when its output exists), on 2 cores, after continued_verifier.sh's steps 1-3 and
# frozen_encoder_student.sh's steps 1-2:
#   RUNS=/work/runs bash docs/experiments/beam_student.sh
# Steps, outputs under $RUNS/v4:
#   1. V2's beam-5 translations of the 29,000 training sources and 113,558 substituted ones (and of valid), binarized;
#   2. V3's decoder trained on them for one epoch, 2e-4 after 50 warm-up updates, 2 threads (20 minutes), exported
#      --fp16: V4-fp16.pt;
#   3. its greedy translations of the same sources;
#   4. the shipped drafter (D3) fine-tuned on them, DRAFTER_UPDATES updates on 2 threads, the uniform average of its
#      last 4 checkpoints exported --fp16: D4.pt;
#   5. one harness run per pair (the shipped pair first) on test2016.
# Outcome (session of 2026-12-02, third; docs/results.md): V4 greedy BLEU valid / test2016 31.18 / 32.23 (V3: 29.68 /
# 30.75), but harder to draft: D4 3.778 valid tokens per iteration (D3 against V3: 3.971), 3.81 on test2016 (3.87);
# SpecDec++ beta 3 tau 1 BLEU 31.68 and drafter-only 25.88, both further below greedy. Not shipped.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:?set RUNS}; W=$RUNS/v4; V2=$RUNS/v2; V3=$RUNS/v3
DRAFTER_UPDATES=${DRAFTER_UPDATES:-3600}
# shellcheck source=docs/experiments/pair_steps.sh
source docs/experiments/pair_steps.sh
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
DECODERS=beam1,specdec,specdec:length=fixed,specdec++,specdec++:beta=5,tau=3,drafter-only

# 1. V2's beam-5 translations, binarized with valid's (recipes/distill.sh finds the training files done)
distil_sources "$V2/V2-fp16.pt" "$W/v2beam" 5

# 2. the student of V2's beam search, from V3: the model at the end of the epoch (valid greedy BLEU at 150, 300, 450
#    updates and the end: 29.89, 30.16, 30.73, 31.18; the average of 300, 450 and the end 30.84)
if [ ! -s "$W/V4-fp16.pt" ]; then
  [ -s "$W/V4.pt" ] || VERIFIER=$V3/V3-avg3.pt THREADS=2 SAVE_EVERY=150 \
    python docs/experiments/seqkd_verifier.py "$W/v2beam/bin" "$W/V4.pt" 1 2e-4
  export_fp16 "$W/V4.pt" "$W/V4-fp16.pt"
fi

# 3. its greedy translations
distil_sources "$W/V4-fp16.pt" "$W/greedy" 1

# 4. the shipped drafter, fine-tuned (V4's encoder is V3's: no rebasing)
finetune_drafter "$W/drafter" "$W/V4-fp16.pt" "$W/greedy/bin" "$V3/D3.pt" "$DRAFTER_UPDATES" "$W/D4.pt"

# 5. the harness, one run per pair
bench_pair "$W" v3 "$V3/V3-fp16.pt" "$V3/D3.pt" "$DECODERS"
bench_pair "$W" v4 "$W/V4-fp16.pt" "$W/D4.pt" "$DECODERS"
