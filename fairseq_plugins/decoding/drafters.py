"""The drafter interface of the speculative loop.

A drafter proposes the next tokens of every active row; the core verifies them.  All
tensors are on the rows still active, in the same order as the core's state:

    tokens:  (B, T) accepted tokens, column 0 is EOS (BOS), pad after ``lengths``
    lengths: (B,)   filled columns of ``tokens``
"""
from torch import Tensor


class Drafter:
    """Base class: ``propose`` is required; the other hooks default to no-ops."""

    def start(self, src_tokens: Tensor, src_lengths: Tensor, max_len: int):
        """Called once per batch, before the first ``propose``."""

    def propose(self, tokens: Tensor, lengths: Tensor, k: int) -> Tensor:
        """Return drafts (B, k') with k' <= k; rows with nothing to propose use pad."""
        raise NotImplementedError

    def update(self, tokens: Tensor, lengths: Tensor, drafts: Tensor, choices: Tensor, n_new: Tensor):
        """After verification: ``choices`` (B, k'+1) is the verifier's greedy token after
        each drafted prefix, ``n_new`` (B,) how many tokens were appended.  ``tokens`` and
        ``lengths`` are the state *before* the append."""

    def keep_rows(self, rows: Tensor):
        """Finished rows left the batch: keep only ``rows`` (1-D long) of any per-row state."""
