"""The drafter contract of the speculative loop (``core.SpeculativeGenerator``).

A drafter proposes the next tokens of every active row; the core verifies them.  Per batch:

    start(BatchStart)                 once, before the first ``propose``
    propose(tokens, lengths, k)       -> (B, k') tensor or a ``Draft`` (k' <= k)
    update(Iteration)                 after each verification
    keep_rows(rows)                   when finished rows leave the batch

All tensors are on the rows still active, in the core's row order:

    tokens:  (B, T) accepted tokens, column 0 is EOS (the decoder's BOS), pad after ``lengths``.
             Columns < lengths are final: the core only ever writes past them.
    lengths: (B,)   filled columns of ``tokens``

The core never mutates a tensor it handed a drafter after handing it (``lengths`` and every
field of ``Iteration`` are fresh tensors each iteration).  A drafter describes itself with
class attributes, which the core and ``--draft-length measured`` read:

    uses_verifier_encoder: the drafter reads ``BatchStart.encoder_out`` instead of encoding
        (the core passes it to every drafter; ``cuda_graphs`` needs it)
    verify_every_column: the core verifies every drafted column (the Jacobi family: the
        verifier's choices after a pad or an EOS are its next guesses); otherwise columns
        after each row's first pad or EOS, which cannot be accepted, are cut from the block
    has_prefix_cache: its first proposal after undrafted iterations feeds every token accepted
        meanwhile (``--draft-length measured`` does not time that iteration)
    failures_persist: a rejected draft foretells that the next one fails too (a source copy
        that diverged, Jacobi's guesses), so ``--draft-length measured`` shrinks a row's draft
        after a rejection (adaptive length); otherwise it drafts the whole --block-size
"""
from dataclasses import dataclass
from typing import Dict, List, Optional, Union

import torch
from torch import Tensor


@dataclass(frozen=True)
class BatchStart:
    """What a drafter may read once per batch.

    src_tokens (B, S), src_lengths (B,); max_len: the longest output fairseq allows;
    encoder_out: the verifier's encoder output (fairseq's dict: ``encoder_out`` (S, B, C) ...).
    """

    src_tokens: Tensor
    src_lengths: Tensor
    max_len: int
    encoder_out: Dict[str, List[Tensor]]


@dataclass(frozen=True)
class Draft:
    """Drafted tokens (B, k') and, optionally, the drafter's scores (B, k', V): logits or
    log-probs; ``lprobs`` normalises them when read (the core only reads ``tokens``)."""

    tokens: Tensor
    scores: Optional[Tensor] = None

    @property
    def lprobs(self) -> Optional[Tensor]:
        """The drafter's log-probs (B, k', V) float32, or None."""
        return None if self.scores is None else torch.log_softmax(self.scores.float(), dim=-1)


@dataclass(frozen=True)
class Iteration:
    """One verification, as the drafter may learn from it.

    lengths (B,): filled columns *before* this iteration's tokens were appended;
    drafts (B, k'); choices (B, k'+1): the verifier's greedy token after each drafted prefix;
    new_tokens (B, k'+1): the tokens appended, the first ``n_new[i]`` of row i valid;
    n_new (B,); lprobs (B, k'+1, V): the verifier's log-probs over the block.
    """

    lengths: Tensor
    drafts: Tensor
    choices: Tensor
    new_tokens: Tensor
    n_new: Tensor
    lprobs: Tensor


class Drafter:
    """Base class: ``propose`` is required; the other hooks default to no-ops."""

    uses_verifier_encoder = False
    verify_every_column = False
    has_prefix_cache = False
    failures_persist = True

    def start(self, batch: BatchStart):
        """Called once per batch, before the first ``propose``."""

    def propose(self, tokens: Tensor, lengths: Tensor, k: int) -> Union[Tensor, Draft]:
        """Drafts (B, k') with k' <= k; rows with less to propose pad their tail."""
        raise NotImplementedError

    def update(self, step: Iteration):
        """After each verification (see :class:`Iteration`)."""

    def keep_rows(self, rows: Tensor):
        """Finished rows left the batch: keep only ``rows`` (1-D long) of any per-row state."""


def draft_tokens(proposal: Union[Tensor, Draft]) -> Draft:
    """A drafter's ``propose`` result as a :class:`Draft`."""
    return proposal if isinstance(proposal, Draft) else Draft(proposal)
