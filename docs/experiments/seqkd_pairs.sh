#!/usr/bin/env bash
# Issue 12: does a Seq-KD verifier make its greedy output easier to draft?  The whole probe of docs/results.md
# (session of 2026-12-01), resumable (every step is skipped when its output exists), one core per command:
#   RUNS=/work/runs bash docs/experiments/seqkd_pairs.sh [LENPEN ...]     # default: 1.0 1.4
# Needs $RUNS/multi30k/{spm,bin} (recipes/data/prepare-with-model.sh with the demo pair's sentencepiece model and
# dictionaries, README Results). For each LENPEN: the demo verifier's beam-5 translations of the training and valid
# sources at that length penalty; its decoder fine-tuned on them (seqkd_verifier.py, 2 epochs, lr 2e-4, the encoder
# frozen so the demo drafter still fits), exported --fp16; that verifier's greedy translations of the 29,000
# training sources and 113,558 substituted ones (MORE_SOURCES=4); the shipped drafter fine-tuned 20 minutes on them;
# the control: the same fine-tune on the demo verifier's own greedy translations; then one harness run per pair
# (the demo pair first) on test2016. Outputs under $RUNS/seqkd.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:?set RUNS}; S=$RUNS/seqkd; DEMO=checkpoints/demo
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
[ $# -gt 0 ] || set -- 1.0 1.4
mkdir -p "$S/bench"

distil() {  # distil TEACHER OUT BEAM LENPEN [MORE_SOURCES]
  TEACHER=$1 RAW=$RUNS/multi30k/spm VERIFIER_DATA=$RUNS/multi30k/bin OUT=$2 BEAM=$3 LENPEN=$4 MORE_SOURCES=${5:-0} \
    DEVICE=cpu bash recipes/distill.sh
}
finetune_drafter() {  # finetune_drafter VERIFIER DATA SAVE_DIR
  [ -s "$3/checkpoint_best.pt" ] || CPU=1 THREADS=1 SETTING=multi30k-drafter VERIFIER=$1 DATA=$2 SAVE_DIR=$3 \
    STOP_TIME_HOURS=0.33 DROPOUT=0.0 LR=5e-5 WARMUP_INIT_LR=5e-5 WARMUP=10000 GLANCE_START=0.3 GLANCE_END=0.3 \
    MAX_EPOCH=1000 KEEP_LAST_EPOCHS=1 SAVE_INTERVAL_UPDATES=200 bash recipes/train-drafter.sh \
    --finetune-from-model $DEMO/drafter.pt --validate-interval-updates 200 --cpu-autocast bf16
}
export_fp16() {  # export_fp16 CHECKPOINT OUT: the inference-only float16 copy, once
  [ -s "$2" ] || python -m fairseq_plugins.scripts.export_checkpoint "$1" "$2" --fp16
}
bench() {  # bench NAME VERIFIER DRAFTER
  [ -s "$S/bench/$1.md" ] || python -m fairseq_plugins.bench.latency "$RUNS/multi30k/bin" --path "$2" \
    --drafter-path "$3" --source-lang en --target-lang de --remove-bpe sentencepiece --max-len-a 1.2 --max-len-b 10 \
    --threads 1 --ct2-dir "$S/ct2-$1" --decoders beam1,specdec,specdec:length=fixed,specdec++,drafter-only,iad \
    --out-md "$S/bench/$1.md" --out-json "$S/bench/$1.json"
}

[ -s "$S/v0greedy/bin/train1.en-de.en.bin" ] || distil $DEMO/verifier.pt "$S/v0greedy" 1 1.0 4
finetune_drafter $DEMO/verifier.pt "$S/v0greedy/bin" "$S/drafter-control"   # the control: the demo verifier's own output
for lenpen in "$@"; do
  name=lp$lenpen
  [ -s "$S/beam5-$name/bin/train.en-de.de.bin" ] || distil $DEMO/verifier.pt "$S/beam5-$name" 5 "$lenpen"
  [ -s "$S/V-$name.pt" ] || python docs/experiments/seqkd_verifier.py "$S/beam5-$name/bin" "$S/V-$name.pt" 2 2e-4
  export_fp16 "$S/V-$name.pt" "$S/V-$name-fp16.pt"
  mkdir -p "$S/greedy-$name/text"
  cp -n "$S/v0greedy/text/more-4.en" "$S/greedy-$name/text/more-4.en"   # the same substituted sources
  [ -s "$S/greedy-$name/bin/train1.en-de.en.bin" ] || distil "$S/V-$name-fp16.pt" "$S/greedy-$name" 1 1.0 4
  finetune_drafter "$S/V-$name-fp16.pt" "$S/greedy-$name/bin" "$S/drafter-$name"
  export_fp16 "$S/drafter-$name/checkpoint_best.pt" "$S/D-$name-fp16.pt"
done
bench demo $DEMO/verifier.pt $DEMO/drafter.pt
for lenpen in "$@"; do bench "lp$lenpen" "$S/V-lp$lenpen-fp16.pt" "$S/D-lp$lenpen-fp16.pt"; done
