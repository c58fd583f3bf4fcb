#!/usr/bin/env bash
# Do no harm, measured: the lossless decoders on the demo verifier with a drafter that never helps, against the
# plugin's greedy at batch 1 and 32. The drafter is the demo drafter with the entries of each weight tensor shuffled
# (seeded): the same architecture, sizes and cost, no knowledge, so it drafts at about one token an iteration and
# `specdec` only pays if its draft-length guard stops drafting. iad, jacobi, gs-jacobi and hybrid-jacobi draft from
# the input or their own iterates, which on translation also almost never helps.
#   bash recipes/benchmark-do-no-harm.sh              # sections harm-cpu-b1 and harm-cpu-b32 of docs/benchmarks.md
#   DRY_RUN=1 bash recipes/benchmark-do-no-harm.sh    # quick: the first 20 sentences, into OUT_DIR/benchmarks.md
# The data, the variables and the extra arguments are recipes/benchmark-demo.sh's.
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"

. "$REPO/recipes/lib/demo_data.sh"          # DEMO
OUT_DIR=${OUT_DIR:-$RUNS/$([ "$DRY_RUN" = 1 ] && echo benchmark-demo-dry || echo benchmark-demo)}
DRAFTER=$OUT_DIR/drafter-shuffled.pt
need_fairseq
check_inputs "DEMO/drafter.pt=$DEMO/drafter.pt"

if ! all_exist "$DRAFTER"; then
  log "a drafter that never helps: $DEMO/drafter.pt with each tensor's entries shuffled -> $DRAFTER"
  mkdir -p "$OUT_DIR"
  "$PYTHON" - "$DEMO/drafter.pt" "$DRAFTER.part" << 'EOF'
import sys
import torch
state = torch.load(sys.argv[1], map_location="cpu", weights_only=False)
generator = torch.Generator().manual_seed(1)
for name, tensor in state["model"].items():
    if tensor.is_floating_point() and tensor.numel() > 1:
        state["model"][name] = tensor.flatten()[torch.randperm(tensor.numel(), generator=generator)].view_as(tensor)
torch.save(state, sys.argv[2])
EOF
  mv "$DRAFTER.part" "$DRAFTER"
fi

# as given, absolute before the cd: benchmark-demo.sh reads them (DOC where set) from its environment
OUT_DIR=$(abspath "$OUT_DIR"); DRAFTER=$(abspath "$DRAFTER"); export DEMO; DEMO=$(abspath "$DEMO")
[ -z "${DOC:-}" ] || { export DOC; DOC=$(abspath "$DOC"); }
cd "$REPO"
drafter=$(relative "$DRAFTER")
DECODERS=${DECODERS:-beam1,greedy,specdec:drafter_path=$drafter,iad,jacobi,gs-jacobi,hybrid-jacobi} \
  BATCH_SIZES=${BATCH_SIZES:-1 32} SECTION_PREFIX=${SECTION_PREFIX:-harm-cpu} OUT_DIR=$OUT_DIR \
  bash "$REPO/recipes/benchmark-demo.sh" --no-ctranslate2 "$@"
