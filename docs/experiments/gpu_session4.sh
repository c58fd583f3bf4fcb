#!/usr/bin/env bash
# The 2026-11-27 session's second device call (what was left of its 15 minutes): gpu_session3.sh's phase 2 showed
# the demo drafter fine-tuned on all 197,263 distilled sources (gpu/dda) rising for its whole ~4 minutes (valid
# spec_tokens_per_iter 3.41 -> 3.51 over 4,631 updates) while the first distillation alone (gpu/dd) fell (3.34 ->
# 3.31). This call goes on from that checkpoint (FROM; the caller put it at checkpoints/demo/drafter.pt in its
# working tree for the call, as the carry limit has no room for a second drafter) on gpu/dda until END seconds,
# validating every 350 updates, and returns the best as fp16 in parts (as it ran: the best only; now
# `finetune_drafter` of gpu_prelude.sh, which returns the last too). Carry .whl and gpu (gpu/dda as dda.tar.xz).
END=${END:-230}
. docs/experiments/gpu_prelude.sh
finetune_drafter dda2 "$REPO/gpu/dda" "${FROM:-$REPO/checkpoints/demo/drafter.pt}" 0-14
ls -la "$OUT"; echo "[$(el)s] done"
