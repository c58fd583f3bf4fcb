#!/usr/bin/env bash
# Train the block NAT drafter of SpecDec (glancing, block size k) with stock fairseq-train.
#   VERIFIER=$RUNS/multi30k/verifier/checkpoint_avg5.pt SETTING=multi30k-drafter bash recipes/train-drafter.sh
#   SETTING=wmt14-ende-drafter bash recipes/train-drafter.sh      # paper Table 7 (right), 8 V100s
# Everything else (launchers, batch scaling, DRY_RUN, extra options after the name) is
# recipes/train-at.sh's: this script only switches task, arch and criterion.
set -euo pipefail
main() {
  . "$(dirname "$0")/lib/common.sh"
  SETTING=${SETTING:-}
  load_setting

  VERIFIER=${VERIFIER:-}                       # its encoder + embeddings initialise the drafter
  DECODER_INIT=${DECODER_INIT:-first}          # with VERIFIER: first|last|none of its decoder layers
  SHARE_ENCODER=${SHARE_ENCODER:-0}            # 1: the encoder IS the verifier's (frozen; decoding reuses it)
  SPEC_EVAL=${SPEC_EVAL:-1}                    # 1: validation simulates SpecDec; best checkpoint by
                                               #    spec_tokens_per_iter (0: by valid loss, faster)
  SPEC_EVAL_STRIDE=${SPEC_EVAL_STRIDE:-1}      # simulate on every N-th valid sentence (of each batch)
  BLOCK_SIZE=${BLOCK_SIZE:-25}                 # k (paper: 25 base, 30 big)
  GLANCE_START=${GLANCE_START:-0.5}; GLANCE_END=${GLANCE_END:-0.3}   # annealed linearly over
  GLANCE_ANNEAL_UPDATES=${GLANCE_ANNEAL_UPDATES:-0}                  # these updates (0: MAX_UPDATE)
  export TASK=speculative_translation ARCH=${ARCH:-block_drafter}
  # a dry run's drafter keeps one epoch file (its best and last are what the recipes read; each carries the
  # verifier's encoder)
  [ "$DRY_RUN" = 1 ] && export DRY_ARCH=block_drafter_tiny BLOCK_SIZE=4 DRY_KEEP_LAST_EPOCHS=1
  local init=() valid=()
  if [ -n "$VERIFIER" ]; then
    [ -s "$VERIFIER" ] || die "VERIFIER=$VERIFIER does not exist"
    init=(--init-from-verifier "$VERIFIER" --init-decoder-from-verifier "$DECODER_INIT")
    if [ "$SHARE_ENCODER" = 1 ]; then init+=(--share-verifier-encoder); fi
  elif [ "$SHARE_ENCODER" = 1 ]; then
    die "SHARE_ENCODER=1 needs VERIFIER (the shared encoder is the verifier's)"
  fi
  if [ "$SPEC_EVAL" = 1 ]; then
    valid=(--best-checkpoint-metric spec_tokens_per_iter --maximize-best-checkpoint-metric
           --spec-eval-stride "$SPEC_EVAL_STRIDE")
  else
    valid=(--no-spec-eval)
  fi
  bash "$REPO/recipes/train-at.sh" --criterion glancing_block_loss --block-size "$BLOCK_SIZE" \
    --glance-ratio-start "$GLANCE_START" --glance-ratio-end "$GLANCE_END" \
    --glance-anneal-updates "$GLANCE_ANNEAL_UPDATES" "${init[@]}" "${valid[@]}" "$@"
}
main "$@"
exit
