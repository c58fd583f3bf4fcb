#!/usr/bin/env bash
# Ship the double-token pair: inference-only float16 copies (weights and config; no optimizer state, no paths of
# this machine) of the single-token L2R model and the bidirectional model started from it, both trained on the
# beam-5 distillation (`PAIR_ONLY=1 bash recipes/double-token/compare-distilled-multi30k.sh`), into OUT_DIR as
# single_l2r.pt and bidirectional.pt. They index the demo pair's dictionary (checkpoints/demo: its sentencepiece
# model and dict.{en,de}.txt serve both); a DATA whose dictionaries differ is refused in one line.
#   bash recipes/double-token/ship.sh
#   SINGLE=path/to/single.pt BIDIRECTIONAL=path/to/bidir.pt OUT_DIR=../runs/pair bash recipes/double-token/ship.sh
# Then `bash recipes/double-token/benchmark.sh` times them on test2016 into docs/double-token.md.
# Every file must stay within MAX_MB MiB (2^20 bytes): a larger one is a one-line error and is not written.
set -euo pipefail
. "$(dirname "$0")/../lib/common.sh"
DISTILLED_ROOT=${DISTILLED_ROOT:-$RUNS/multi30k/double-token-distilled}   # compare-distilled-multi30k.sh's
SINGLE=${SINGLE:-$DISTILLED_ROOT/single_l2r/checkpoint_avg_best.pt}
BIDIRECTIONAL=${BIDIRECTIONAL:-$DISTILLED_ROOT-warm/bidirectional/checkpoint_avg_best.pt}
DATA=${DATA:-$RUNS/multi30k/bin}            # the dictionaries the models were trained with
DEMO=${DEMO:-$REPO/checkpoints/demo}
SRC=${SRC:-en}; TGT=${TGT:-de}
OUT_DIR=${OUT_DIR:-$REPO/checkpoints/double-token}
MAX_MB=${MAX_MB:-20}

need_fairseq
check_inputs "SINGLE=$SINGLE" "BIDIRECTIONAL=$BIDIRECTIONAL" "DATA=$DATA/dict.$SRC.txt" "DATA=$DATA/dict.$TGT.txt" \
  "DEMO=$DEMO/dict.$SRC.txt" "DEMO=$DEMO/dict.$TGT.txt"
for lang in "$SRC" "$TGT"; do
  cmp -s "$DATA/dict.$lang.txt" "$DEMO/dict.$lang.txt" || die "DATA=$DATA: dict.$lang.txt is not the demo pair's" \
    "($DEMO/dict.$lang.txt): the shipped pair must index the dictionary it is shipped with"
done
mkdir -p "$OUT_DIR"
tmp=$(mktemp -d "$OUT_DIR/.ship.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# export every model before writing any, so that a refused one leaves OUT_DIR as it was
declare -A sources=([single_l2r]=$SINGLE [bidirectional]=$BIDIRECTIONAL)
for name in single_l2r bidirectional; do
  log "$name: ${sources[$name]} -> $OUT_DIR/$name.pt"
  "$PYTHON" -m fairseq_plugins.scripts.export_checkpoint "${sources[$name]}" "$tmp/$name.pt" --fp16 >&2
  check_shippable "$tmp/$name.pt" "$name.pt"
done
mv "$tmp/single_l2r.pt" "$tmp/bidirectional.pt" "$OUT_DIR/"
log "shipped to $OUT_DIR: single_l2r.pt bidirectional.pt"
