"""A sequential head on the block drafter: the block's tokens drafted one after another (Hydra's idea).

The block drafter predicts its k tokens in parallel, each blind to the tokens drafted before it in the block, and so
drifts from the continuation the verifier takes (drafted autoregressively the same drafter's drafts
survive 4.8-5.0 tokens per iteration on Multi30k, as a block 3.9).  The head keeps the block's one call and only
changes its output: query j's state x_j (after the last layer norm) is corrected by the embedding of the token
drafted at j - 1 (for j = 0 the last accepted token), then goes through the drafter's own output layer::

    x'_j = x_j + W2 relu(W1 [x_j ; E[t_{j-1}]] + b1) + b2        t_j = argmax O x'_j

W2 and b2 start at zero, where the head is the identity (the block drafter's own drafts).  It is trained on a trained,
frozen drafter by ``fairseq_plugins.scripts.train_sequential_head``.

Decoding runs it without a per-token loop of tensor operations: ``decoding.head_drafting.HeadDrafting``.
"""
from typing import Optional

import torch
from torch import Tensor, nn


class SequentialHead(nn.Module):
    """x (.., C) query states and e (.., D) embeddings of the previous tokens -> corrected states x' (.., C)."""

    def __init__(self, state_dim: int, embed_dim: int):
        super().__init__()
        self.inner = nn.Linear(state_dim + embed_dim, state_dim)
        self.outer = nn.Linear(state_dim, state_dim)
        nn.init.zeros_(self.outer.weight)
        nn.init.zeros_(self.outer.bias)

    def forward(self, x: Tensor, e: Tensor) -> Tensor:
        return x + self.outer(torch.relu(self.inner(torch.cat([x, e], dim=-1))))


def head_of(decoder) -> Optional[SequentialHead]:
    """The decoder's sequential head, or None (drafters trained without one)."""
    return getattr(decoder, "sequential_head", None)
