#!/usr/bin/env bash
# BLEU of a fairseq-generate output, the ways the papers report it, plus the repetition ratio.
#   GEN=gen.txt TGT_LANG=de REF_RAW=$RUNS/wmt14-ende/raw/test.de bash recipes/evaluate-bleu.sh
#   GEN=gen.txt TGT_LANG=de SACREBLEU_TEST=wmt14/full LANGPAIR=en-de bash recipes/evaluate-bleu.sh
# 1. tokenized BLEU (multi-bleu.perl: sacreBLEU -tok none -s none) of the H lines against the T lines, both after
#    --remove-bpe; for WMT14 en-de with compound splitting (a-b -> a ##AT##-##AT## b, as
#    fairseq's compound_split_bleu.sh and the NAT/SpecDec papers);
# 2. sacreBLEU of the detokenized hypotheses against plain references (REF_RAW or SACREBLEU_TEST);
# 3. token repetition ratio (paper Table 9), fairseq_plugins/bench/repetition.py.
# Writes $GEN.hyp, $GEN.ref (tokenized), $GEN.detok and $GEN.scores (key=value).
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"
GEN=${GEN:?fairseq-generate output file}
TGT_LANG=${TGT_LANG:-de}
COMPOUND_SPLIT=${COMPOUND_SPLIT:-auto}   # auto: on when TGT_LANG=de
DETOK=${DETOK:-moses}                    # hypotheses -> plain text: moses (sacremoses) | none (e.g. sentencepiece)
REF_RAW=${REF_RAW:-}                     # plain-text references for sacreBLEU (several: space-separated)
SACREBLEU_TEST=${SACREBLEU_TEST:-}; LANGPAIR=${LANGPAIR:-}   # or a sacreBLEU test set
SACREBLEU_TOK=${SACREBLEU_TOK:-13a}
text_tools() { "$PYTHON" "$REPO/recipes/lib/text_tools.py" "$@"; }
# sacrebleu_line ARGS...: the last line of sacreBLEU's text output, or its own error in one line
sacrebleu_line() {
  local err line; err=$(mktemp)
  if ! line=$(sacrebleu "$@" 2> "$err" | tail -n 1); then
    line=$(grep -v '^[[:space:]]*$' "$err" | tail -n 1); rm -f "$err"; die "sacreBLEU: $line"
  fi
  rm -f "$err"; echo "$line"
}
check_inputs "GEN=$GEN"
# shellcheck disable=SC2086  # REF_RAW: space-separated list of reference files
for f in $REF_RAW; do check_inputs "REF_RAW=$f"; done
grep -q "^H-" "$GEN" || die "no H- lines in $GEN: not a fairseq-generate output?"
grep -q "^T-" "$GEN" || die "no T- lines in $GEN: tokenized BLEU needs the references fairseq-generate prints"
if [ "$COMPOUND_SPLIT" = auto ]; then COMPOUND_SPLIT=$([ "$TGT_LANG" = de ] && echo 1 || echo 0); fi

# fairseq-generate prints sentences in batch order: sort by id
ids_sorted() { grep "^$1-" "$GEN" | sed "s/^$1-//" | sort -n -k1,1 -t$'\t'; }
ids_sorted H | cut -f3 > "$GEN.hyp"
ids_sorted T | cut -f2 > "$GEN.ref"
scores=$GEN.scores
echo "sentences=$(wc -l < "$GEN.hyp")" > "$scores"

# 1. tokenized BLEU
hyp=$GEN.hyp ref=$GEN.ref
if [ "$COMPOUND_SPLIT" = 1 ]; then
  text_tools compound-split < "$GEN.hyp" > "$GEN.hyp.cs"; text_tools compound-split < "$GEN.ref" > "$GEN.ref.cs"
  hyp=$GEN.hyp.cs ref=$GEN.ref.cs
fi
tok_bleu=$(sacrebleu_line "$ref" -i "$hyp" -tok none -s none --force -w 2 -f text)
echo "tokenized_bleu=$(echo "$tok_bleu" | sed -E "s/^[^=]*= ([0-9.]+) .*/\\1/")" >> "$scores"
echo "tokenized_bleu_line=$tok_bleu (compound_split=$COMPOUND_SPLIT)" >> "$scores"

# 2. sacreBLEU
if [ -n "$REF_RAW" ] || [ -n "$SACREBLEU_TEST" ]; then
  if [ "$DETOK" = moses ] && ! "$PYTHON" -c "import sacremoses" 2>/dev/null; then
    log "sacremoses missing: sacreBLEU skipped (DETOK=none if the hypotheses are plain text)"
  else
    text_tools detok --lang "$TGT_LANG" --tool "$DETOK" < "$GEN.hyp" > "$GEN.detok"
    # shellcheck disable=SC2206  # REF_RAW: space-separated list of reference files
    if [ -n "$REF_RAW" ]; then ref=($REF_RAW); else ref=(-t "$SACREBLEU_TEST" -l "$LANGPAIR"); fi
    sb=$(sacrebleu_line "${ref[@]}" -i "$GEN.detok" -tok "$SACREBLEU_TOK" -f text)
    echo "sacrebleu=$(echo "$sb" | sed -E "s/^[^=]*= ([0-9.]+) .*/\\1/")" >> "$scores"
    echo "sacrebleu_line=$sb" >> "$scores"
  fi
fi

# 3. repetition ratio (words of the tokenized output)
rep=$("$PYTHON" "$REPO/fairseq_plugins/bench/repetition.py" "$GEN.hyp" --json)  # standalone: no fairseq import
echo "repetition_ratio=$(echo "$rep" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["repetition_ratio"])')" >> "$scores"
cat "$scores"
