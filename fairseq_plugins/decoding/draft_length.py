"""Adaptive draft length (``--draft-length adaptive``, the default): per row,

    a fully accepted draft           -> the next draft is twice as long (at most --block-size)
    a draft rejected after n tokens  -> the next draft is n + 1 tokens long
    nothing drafted (e.g. IAD found no match) -> unchanged

so a row whose drafts fail drafts one token per iteration and costs about one greedy step,
and a row whose drafts succeed is back at full length after a few iterations.  The output
is unchanged: the length only decides how much is offered to the verifier.
"""
import torch
from torch import Tensor


def initial_lengths(batch_size: int, k_max: int, device) -> Tensor:
    """(B,) every row starts with the longest draft."""
    return torch.full((batch_size,), k_max, dtype=torch.long, device=device)


def next_lengths(k: Tensor, offered: Tensor, accepted: Tensor, k_max: int) -> Tensor:
    """k, offered, accepted: (B,) draft length asked, drafted tokens offered (non-pad,
    within the row's length), drafted tokens accepted -> (B,) next draft lengths."""
    grown = torch.clamp(k * 2, max=k_max)
    shrunk = accepted + 1
    adapted = torch.where(accepted >= offered, grown, shrunk)
    return torch.where(offered > 0, adapted, k)
