#!/usr/bin/env bash
# Train the block NAT drafter of SpecDec (glancing, block size k) with stock fairseq-train.
#   VERIFIER=/work/runs/multi30k/verifier/checkpoint_avg5.pt SETTING=multi30k-drafter bash recipes/train-drafter.sh
#   SETTING=wmt14-ende-drafter bash recipes/train-drafter.sh      # paper Table 7 (right), 8 V100s
# Everything else (launchers, batch scaling, DRY_RUN, extra options after the name) is
# recipes/train-at.sh's: this script only switches task, arch and criterion.
set -euo pipefail
main() {
  . "$(dirname "$0")/lib/common.sh"
  SETTING=${SETTING:-}
  if [ -n "$SETTING" ]; then . "$REPO/recipes/settings/$SETTING.sh"; fi

  VERIFIER=${VERIFIER:-}                       # its encoder + embeddings initialise the drafter
  BLOCK_SIZE=${BLOCK_SIZE:-25}                 # k (paper: 25 base, 30 big)
  GLANCE_START=${GLANCE_START:-0.5}; GLANCE_END=${GLANCE_END:-0.3}   # annealed linearly over
  GLANCE_ANNEAL_UPDATES=${GLANCE_ANNEAL_UPDATES:-0}                  # these updates (0: MAX_UPDATE)
  export TASK=speculative_translation ARCH=${ARCH:-block_drafter}
  [ "$DRY_RUN" = 1 ] && export DRY_ARCH=block_drafter_tiny BLOCK_SIZE=4
  local init=()
  if [ -n "$VERIFIER" ]; then
    [ -s "$VERIFIER" ] || die "VERIFIER=$VERIFIER does not exist"
    init=(--init-from-verifier "$VERIFIER")
  fi
  bash "$REPO/recipes/train-at.sh" --criterion glancing_block_loss --block-size "$BLOCK_SIZE" \
    --glance-ratio-start "$GLANCE_START" --glance-ratio-end "$GLANCE_END" \
    --glance-anneal-updates "$GLANCE_ANNEAL_UPDATES" "${init[@]}" "$@"
}
main "$@"
exit
