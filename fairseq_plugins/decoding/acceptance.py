"""Acceptance rules, as small pure functions in the SpecDec paper's notation.

All functions work on a batch of verification blocks:

    drafts    d: (B, k)         drafted tokens d_1..d_k
    lprobs    P: (B, k+1, V)    verifier log-probs; row j scores the token after d_<=j
    cum0        : (B,)          cumulative score of the accepted prefix (fairseq's ``scores``)

fairseq's ``SequenceGenerator`` with ``--beam 1`` picks, at every step, the top entry of
``lprobs + cumulative score`` in float32.  Adding the cumulative score can round two
close log-probs to a tie, so :func:`verifier_choices` reproduces that sum exactly.
"""
import math
from dataclasses import dataclass
from typing import Callable, Optional

import numpy
import torch
from torch import Tensor


@dataclass
class GenerationLimits:
    """The rules ``SequenceGenerator`` applies to log-probs before choosing a token."""

    pad: int
    unk: int
    eos: int
    min_len: int = 1
    max_len: int = 200
    unk_penalty: float = 0.0


def apply_limits(lprobs: Tensor, steps: Tensor, limits: GenerationLimits, lowest: int = 0,
                 highest: Optional[int] = None) -> Tensor:
    """Mask ``lprobs`` (B, m, V) in place as fairseq does at decoding step ``steps`` (B, m).

    No pad, unk penalty, no EOS before ``min_len``, only EOS from ``max_len`` on.  ``lowest`` and ``highest``
    (None: unknown): bounds of ``steps`` the caller knows, which spare the masks that cannot apply.
    """
    lprobs.nan_to_num_(nan=-math.inf, posinf=math.inf, neginf=-math.inf)  # NaN -> -inf only (17x cheaper than indexing)
    lprobs[:, :, limits.pad] = -math.inf
    if limits.unk_penalty:
        lprobs[:, :, limits.unk] -= limits.unk_penalty
    if lowest < limits.min_len:
        lprobs[:, :, limits.eos].masked_fill_(steps < limits.min_len, -math.inf)
    if highest is not None and highest < limits.max_len:
        return lprobs
    at_max = steps >= limits.max_len  # (B, m)
    if bool(at_max.any()):
        eos_lprobs = lprobs[:, :, limits.eos].clone()
        lprobs.masked_fill_(at_max.unsqueeze(-1), -math.inf)
        lprobs[:, :, limits.eos] = torch.where(at_max, eos_lprobs, lprobs[:, :, limits.eos])
    return lprobs


def cumulative_scores(lprobs: Tensor, drafts: Tensor, cum0: Tensor) -> Tensor:
    """Cumulative scores along the drafted path, summed one step at a time in float32.

    Returns (B, k+1): column j is the score of the prefix extended by d_1..d_j.  On a CPU the k
    sequential sums are numpy's float32 ``add.accumulate`` (the same roundings as k tensor
    additions, which cost ~5 us each); on a GPU they stay on the device (no host sync).
    """
    if drafts.size(1) == 0:
        return cum0[:, None]
    picked = lprobs[:, :-1].gather(2, drafts.unsqueeze(-1)).squeeze(-1)  # (B, k)
    if lprobs.device.type == "cpu":
        path = torch.cat([cum0[:, None], picked], dim=1).numpy()  # float32
        return torch.from_numpy(numpy.add.accumulate(path, axis=1))
    cums = [cum0]
    for j in range(drafts.size(1)):
        cums.append(picked[:, j] + cums[-1])
    return torch.stack(cums, dim=1)


def verifier_choices(lprobs: Tensor, cum: Tensor):
    """The verifier's greedy token after each drafted prefix, exactly as ``--beam 1``.

    Args:
        cum: (B, k+1) from :func:`cumulative_scores`.
    Returns:
        tokens (B, k+1) and their cumulative scores (B, k+1).
    """
    if lprobs.device.type == "cpu" and lprobs.dtype == torch.float32 == cum.dtype and cum.numel() > 1:
        unique = unique_choices_on_host(lprobs, cum)
        if unique is not None:
            return unique
    candidates = lprobs + cum.unsqueeze(-1)
    # k=2 as fairseq's beam search with beam 1: ties break the same way
    scores, tokens = candidates.topk(min(2, candidates.size(-1) - 1), dim=-1)
    return tokens[:, :, 0], scores[:, :, 0]


def unique_choices_on_host(lprobs: Tensor, cum: Tensor):
    """:func:`verifier_choices` without the (B, k+1, V) sum and top-k, or None where a tie is possible (numpy; used
    for more than one row: within a decoding loop it takes ~0.07 ms at 11 x 8,008 where the top-k path takes ~0.18,
    and ~0.08 ms at one row where the top-k path takes ~0.06).

    Adding a score c rounds monotonically, so the largest sum is the largest log-prob's, and another token can
    only tie with it after rounding when its log-prob is within one unit in the last place (ulp) of the sum, which
    is at most (|best| + |c|) * 2 ** -23: when no row has a second log-prob within 4 such units of its best, each
    row's argmax is top-k's first choice and its sum its score. (Infinite or NaN scores find no single near entry:
    None.)"""
    values, offsets = lprobs.numpy(), cum.numpy()
    top = values.max(-1)  # (B, k+1)
    lowest = top - (numpy.abs(top) + numpy.abs(offsets)) * 2.0 ** -21
    if numpy.count_nonzero(values >= lowest[..., None]) != top.size:
        return None
    return torch.from_numpy(values.argmax(-1)), torch.from_numpy(top + offsets)


def leading_true(accepted: Tensor) -> Tensor:
    """(B, k) bool -> (B,) length of the leading run of True."""
    return accepted.long().cumprod(dim=1).sum(dim=1)


def greedy_accept(drafts: Tensor, choices: Tensor) -> Tensor:
    """Vanilla SpecDec (Eq. 4): d_j passes while it equals the verifier's greedy token."""
    return drafts == choices[:, :-1]


def top_beta_accept(drafts: Tensor, lprobs: Tensor, beta: int, tau: float) -> Tensor:
    """SpecDec++ (Eq. 6-7), read against the verifier: d_j passes when it is among the
    verifier's top-``beta`` tokens and log P(d_j) >= log P(top-1) - ``tau``."""
    block = lprobs[:, :-1]  # (B, k, V)
    top_values, top_tokens = block.topk(beta, dim=-1)
    in_top_beta = (top_tokens == drafts.unsqueeze(-1)).any(dim=-1)
    drafted = block.gather(2, drafts.unsqueeze(-1)).squeeze(-1)
    return in_top_beta & (drafted >= top_values[:, :, 0] - tau)


AcceptanceRule = Callable[[Tensor, Tensor, Tensor], Tensor]  # (drafts, choices, lprobs) -> (B, k) bool


def is_lossless(beta: int, tau: float) -> bool:
    """Whether (beta, tau) is vanilla SpecDec's rule, whose output is the verifier's greedy one whatever the drafts."""
    return beta == 1 and tau == 0.0


def choose_rule(beta: int, tau: float) -> AcceptanceRule:
    """The acceptance rule for SpecDec++'s (beta, tau): beta=1, tau=0 is vanilla (lossless)."""
    if is_lossless(beta, tau):
        return lambda drafts, choices, lprobs: greedy_accept(drafts, choices)
    return lambda drafts, choices, lprobs: top_beta_accept(drafts, lprobs, beta, tau)
