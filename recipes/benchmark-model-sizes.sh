#!/usr/bin/env bash
# What a decoding step and a verified block cost at the sizes users train (Transformer-base, Transformer-big),
# measured with random-weight models on the demo pair's Multi30k data: weights do not change what a step costs,
# so these rows show how far drafting can go over the plugin's own greedy at each size (`oracle`: the core with
# a drafter that always drafts greedy's next k tokens; `bound`: one teacher-forced pass of the same verifier).
#   bash recipes/benchmark-model-sizes.sh                 # sections sizes-cpu-base-b1 and sizes-cpu-big-b1
#   ARCHS=transformer_wmt_en_de MAX_SENTENCES=20 bash recipes/benchmark-model-sizes.sh
#   SECTION_PREFIX=sizes-xeon bash recipes/benchmark-model-sizes.sh   # sections sizes-xeon-base-b1, ... (another CPU)
#   SECTION_PREFIX=drafters-xeon ARCHS=transformer_wmt_en_de DECODERS=beam1,greedy,oracle DRAFTER_SHAPES="1 2 6 6+1 6+6" \
#     bash recipes/benchmark-model-sizes.sh --no-ctranslate2   # what a proposal of each drafter shape costs
# Needs the data of recipes/benchmark-demo.sh (run it first; DATA= for another binarized folder with a joined
# dictionary). Each model: one fairseq-train update at a learning rate of ~0 (a fairseq checkpoint of that
# architecture with its initial weights), exported with float16-number weights as the demo pair is.
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"

DATA=${DATA:-$RUNS/benchmark-demo/data/bin}
OUT_DIR=${OUT_DIR:-$RUNS/benchmark-sizes}
ARCHS=${ARCHS:-transformer_wmt_en_de transformer_vaswani_wmt_en_de_big}
MAX_SENTENCES=${MAX_SENTENCES:-200}         # the first N test2016 sentences (0: all 1,000)
THREADS=${THREADS:-1}
WARMUP=${WARMUP:-5}
ROUNDS=${ROUNDS:-5}
DECODERS=${DECODERS:-beam1,greedy,oracle,bound}
CT2_COMPUTE_TYPES=${CT2_COMPUTE_TYPES:-auto}  # the CPU's of float32, int8, int16, bfloat16 (e.g. float32,int8)
# drafters timed beside DECODERS, with --profile (its "drafter" column: what a proposal of k = 10 tokens costs), each
# of the verifier's width, with random weights, drafting in every iteration: N = N decoder layers on the verifier's
# encoder (shared, as the recipes train them), E+N = its own encoder of E layers and N decoder layers (the SpecDec
# paper's drafter: 6+6). Their drafts are noise that the verifier's block stops at (their first EOS): `oracle` in
# DECODERS gives what verifying a whole block costs
DRAFTER_SHAPES=${DRAFTER_SHAPES:-}
DOC=${DOC:-$REPO/docs/benchmarks.md}
SECTION_PREFIX=${SECTION_PREFIX:-sizes-cpu}   # sections SECTION_PREFIX-base-b1, SECTION_PREFIX-big-b1
for shape in $DRAFTER_SHAPES; do
  [[ $shape =~ ^[1-9][0-9]*(\+[1-9][0-9]*)?$ ]] || \
    die "DRAFTER_SHAPES: '$shape' is neither N (decoder layers on the verifier's encoder) nor E+N (own encoder)"
done

need_fairseq
check_inputs "DATA/dict.en.txt=$DATA/dict.en.txt" "DATA/test.en-de.en.bin=$DATA/test.en-de.en.bin"

short_name() { case "$1" in transformer_wmt_en_de) echo base ;; transformer_vaswani_wmt_en_de_big) echo big ;; *) echo "$1" ;; esac; }

# initial_weights SAVE_DIR EXPORT FAIRSEQ_TRAIN_ARGS...: one fairseq-train update on DATA at a learning rate of ~0 (a
# checkpoint with its initial weights) into SAVE_DIR, exported with float16-number weights to EXPORT
initial_weights() {
  local save_dir=$1 export=$2
  shift 2
  OMP_NUM_THREADS=$THREADS fairseq-train "$DATA" --user-dir "$REPO/fairseq_plugins" --source-lang en --target-lang de \
    --optimizer adam --lr 1e-12 --max-tokens 256 --max-update 1 --disable-validation --cpu --num-workers 0 \
    --save-dir "$save_dir" --no-epoch-checkpoints --log-format simple --seed 1 "$@" >&2
  "$PYTHON" -m fairseq_plugins.scripts.export_checkpoint "$save_dir/checkpoint_last.pt" "$export" --fp16 >&2
}

# random_drafter VERIFIER SHAPE EXPORT: a block drafter of SHAPE (see DRAFTER_SHAPES) with the verifier's width
# (VERIFIER_* of recipes/lib/verifier_info.py, set by the caller), its initial weights
random_drafter() {
  local verifier=$1 shape=$2 export=$3 layers=() k=10
  case $shape in
    *+*) layers=(--encoder-layers "${shape%+*}" --decoder-layers "${shape#*+}") ;;
    *) layers=(--decoder-layers "$shape" --init-from-verifier "$verifier" --share-verifier-encoder) ;;
  esac
  log "a random-weight drafter of shape $shape for $verifier -> $export"
  initial_weights "$export.train" "$export" --task speculative_translation --arch block_drafter "${layers[@]}" \
    --max-source-positions "$VERIFIER_MAX_SOURCE" --max-target-positions $((VERIFIER_MAX_TARGET + k)) \
    --encoder-embed-dim "$VERIFIER_EMBED_DIM" --decoder-embed-dim "$VERIFIER_EMBED_DIM" \
    --encoder-ffn-embed-dim "$VERIFIER_FFN_DIM" --decoder-ffn-embed-dim "$VERIFIER_FFN_DIM" \
    --encoder-attention-heads "$VERIFIER_HEADS" --decoder-attention-heads "$VERIFIER_HEADS" --share-all-embeddings \
    --criterion glancing_block_loss --block-size $k
  rm -rf "$export.train"
}

DATA=$(abspath "$DATA"); OUT_DIR=$(abspath "$OUT_DIR"); DOC=$(abspath "$DOC")   # as given, before the cd
cd "$REPO"
for arch in $ARCHS; do
  name=$(short_name "$arch")
  model=$OUT_DIR/$name/model-fp16.pt
  if ! all_exist "$model"; then
    log "$arch: a checkpoint with its initial weights -> $model"
    initial_weights "$OUT_DIR/$name" "$model" --task translation --arch "$arch" --share-all-embeddings \
      --criterion cross_entropy
  fi
  decoders=$DECODERS profile=() verifier=$OUT_DIR/$name/checkpoint_last.pt   # the drafters start from its weights
  if [ -n "$DRAFTER_SHAPES" ]; then
    eval "$("$PYTHON" "$REPO/recipes/lib/verifier_info.py" "$verifier" \
      --src-dict "$DATA/dict.en.txt" --tgt-dict "$DATA/dict.de.txt")"
  fi
  for shape in $DRAFTER_SHAPES; do
    drafter=$OUT_DIR/$name/drafter-$shape.pt
    all_exist "$drafter" || random_drafter "$verifier" "$shape" "$drafter"
    decoders+=",specdec:drafter_path=$(relative "$drafter"),draft_length=fixed" profile=(--profile)
  done
  section=$SECTION_PREFIX-$name-b1
  log "latency at $arch size ($MAX_SENTENCES sentences, batch 1, $THREADS thread(s)) -> $DOC, section $section"
  OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS "$PYTHON" -m fairseq_plugins.bench.latency "$(relative "$DATA")" \
    --path "$(relative "$model")" --source-lang en --target-lang de --gen-subset test --remove-bpe sentencepiece \
    --max-len-a 1.2 --max-len-b 10 --batch-sizes 1 --threads "$THREADS" --warmup "$WARMUP" --rounds "$ROUNDS" \
    --max-sentences "$MAX_SENTENCES" --decoders "$decoders" "${profile[@]}" --ct2-compute-types "$CT2_COMPUTE_TYPES" \
    --ct2-dir "$OUT_DIR/$name/ct2" --out-md "$DOC" --md-section "$section" --out-json "$OUT_DIR/$section.json" \
    --no-progress-bar "$@" >&2
done
log "done: $DOC"
