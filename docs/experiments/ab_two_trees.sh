#!/usr/bin/env bash
# A/B of two versions of the package, one process per run, in ABBA turns: A = the package at commit REV (git
# archive into a temporary folder, put first on PYTHONPATH), B = the working tree. Pauses background trainings.
#   RUNS=... bash docs/experiments/ab_two_trees.sh REV N ROUNDS DECODER [LENGTH]
#   e.g. bash docs/experiments/ab_two_trees.sh 7f1f4cf 300 3 specdec fixed    # prints each run; compare the medians
set -eu
REV=$1; N=$2; ROUNDS=$3; DECODER=$4; LENGTH=${5:-fixed}
OLD=$(mktemp -d); trap 'rm -rf "$OLD"; [ -n "${TRAIN:-}" ] && kill -CONT $TRAIN' EXIT
git archive "$REV" fairseq_plugins fairseq_plugins_compat | tar -x -C "$OLD"
TRAIN=$(pgrep -f fairseq-train | tr "\n" " " || true); [ -n "$TRAIN" ] && kill -STOP $TRAIN
for _ in $(seq "$ROUNDS"); do
  for v in A B B A; do
    if [ $v = A ]; then PP=$OLD; else PP=; fi
    echo "$v $(PYTHONPATH=$PP python docs/experiments/decode_valid.py "$N" "$DECODER" "$LENGTH" 2>/dev/null | grep RESULT)"
  done
done
