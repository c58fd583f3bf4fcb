#!/usr/bin/env bash
# The Multi30k en-de data of the demo pair, encoded with its own sentencepiece model and dictionaries
# (checkpoints/demo): $RUNS/demo-pair/data/spm/{train,valid,test,test1}.{en,de} and .../bin
# (valid = val, test = test2016, test1 = test2017). The raw text is recipes/data/prepare-multi30k.sh's
# ($RUNS/multi30k/raw: a local copy, else downloaded; that recipe also learns a sentencepiece model, not used here).
#   bash recipes/demo-pair/data.sh
set -euo pipefail
. "$(dirname "$0")/steps.sh"
MULTI30K=${MULTI30K:-$RUNS/multi30k}     # prepare-multi30k.sh's OUT_DIR

if ! all_exist "$MULTI30K"/raw/{train,valid,test,test1}.{en,de}; then
  OUT_DIR=$MULTI30K bash "$REPO/recipes/data/prepare-multi30k.sh"
fi
RAW=$MULTI30K/raw SPM_MODEL=$DEMO/sentencepiece.model DICT_DIR=$DEMO SRC=en TGT=de TEST_SPLITS="test test1" \
  OUT_DIR=$DEMO_DATA bash "$REPO/recipes/data/prepare-with-model.sh"
