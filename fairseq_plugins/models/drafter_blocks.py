"""Pure tensor functions behind the block NAT drafter (SpecDec section 3.1).

Decoder input layout (one row of a batch, ``P`` = longest prefix in the batch)::

    columns 0 .. P-1      prefix  y_<=p, right-padded:  eos y_1 .. y_p  pad .. pad
    columns P .. P+k-1    k queries (mask symbol, or a glanced gold token in training)

Visibility (``block_attention_mask``), True = may attend:

* a query sees every real prefix token and all k queries (bidirectional block);
* a prefix token sees the prefix only -- never a query -- causally by default
  (``prefix_causal``), so prefix states are exactly those of a left-to-right decoder
  and do not depend on k or on what is being drafted;
* pad columns are hidden from everyone by the key padding mask (``block_input``).

Column 0 is always the leading eos, visible to every row, so no attention row is empty.
Positions count real tokens only (fairseq's ``make_positions``), so the first query of a
row with prefix length L gets position L+1 whatever the padding in between.
"""
import torch
from torch import Tensor


def block_attention_mask(prefix_len: int, k: int, prefix_causal: bool = True, device=None) -> Tensor:
    """Visibility among the (prefix_len + k) decoder columns.

    Returns a bool tensor (T, T), T = prefix_len + k, True where row i may attend to
    column j.  (fairseq's attention wants the opposite: pass ``~mask``.)
    """
    total = prefix_len + k
    allowed = torch.zeros(total, total, dtype=torch.bool, device=device)
    if prefix_causal:
        allowed[:prefix_len, :prefix_len] = torch.ones(prefix_len, prefix_len, dtype=torch.bool, device=device).tril()
    else:
        allowed[:prefix_len, :prefix_len] = True
    allowed[prefix_len:, :] = True  # queries see the whole prefix and the whole block
    return allowed


def normalize_prefix(prefix_tokens: Tensor, prefix_lengths: Tensor, pad: int) -> Tensor:
    """(B, P) prefix with every column at or past ``prefix_lengths`` set to pad."""
    cols = torch.arange(prefix_tokens.size(1), device=prefix_tokens.device)
    return prefix_tokens.masked_fill(cols[None, :] >= prefix_lengths[:, None], pad)


def block_input(prefix_tokens: Tensor, prefix_lengths: Tensor, query_tokens: Tensor, pad: int):
    """Concatenate prefix and queries.

    prefix_tokens (B, P), prefix_lengths (B,), query_tokens (B, k) ->
    tokens (B, P+k) and key_padding_mask (B, P+k) (True at pad columns).
    """
    tokens = torch.cat([normalize_prefix(prefix_tokens, prefix_lengths, pad), query_tokens], dim=1)
    return tokens, tokens.eq(pad)


def source_positions(src_padding_mask: Tensor) -> Tensor:
    """(B, S) index of each real source token among the real ones (left or right padding)."""
    return (~src_padding_mask).long().cumsum(1) - 1


def soft_copy(src_embedding: Tensor, src_padding_mask: Tensor, target_positions: Tensor,
              temperature: Tensor) -> Tensor:
    """Soft copy of source embeddings for the queries (the target length is unknown, so
    target position t is aligned with source position t).

    src_embedding (B, S, C), src_padding_mask (B, S) (True at pad), target_positions (B, k)
    (0-based index of the predicted target token) ->
    (B, k, C) = sum_i softmax_i(-|i - t| / temperature) e_i over real source tokens i.
    """
    src_pos = source_positions(src_padding_mask).to(src_embedding.dtype)  # (B, S)
    distance = (src_pos[:, None, :] - target_positions[:, :, None].to(src_embedding.dtype)).abs()
    scores = -distance / temperature.clamp(min=1e-3)
    scores = scores.masked_fill(src_padding_mask[:, None, :], float("-inf"))
    return torch.bmm(torch.softmax(scores, dim=-1), src_embedding)


def sample_prefix_lengths(target: Tensor, pad: int, generator=None) -> Tensor:
    """Uniform p in {0, .., m} per row, m = target length without its final eos.

    target (B, T) right-padded, ends with eos -> p (B,).  p = m drafts just the eos.
    """
    n_tokens = target.ne(pad).sum(1)  # m + 1
    u = torch.rand(target.size(0), generator=generator).to(target.device)
    return torch.minimum((u * n_tokens.to(u.dtype)).floor().long(), n_tokens - 1)


def make_blocks(target: Tensor, p: Tensor, k: int, pad: int, eos: int):
    """Training rows from gold targets and sampled prefix lengths.

    target (B, T) right-padded (y_1 .. y_m eos pad ..), p (B,) ->
    prefix_tokens (B, P) = eos y_1 .. y_p (right-padded), prefix_lengths (B,) = p + 1,
    gold (B, k) = y_{p+1} .. y_{p+k}, pad past the target's eos (excluded from the loss).
    """
    bsz, tgt_len = target.shape
    prefix_lengths = p + 1
    full = torch.cat([target.new_full((bsz, 1), eos), target], dim=1)  # (B, T+1)
    prefix = normalize_prefix(full[:, : int(prefix_lengths.max())], prefix_lengths, pad)
    index = p[:, None] + torch.arange(k, device=target.device)[None, :]  # (B, k)
    padded = torch.cat([target, target.new_full((bsz, k), pad)], dim=1)
    gold = padded.gather(1, index.clamp(max=tgt_len + k - 1))
    return prefix, prefix_lengths, gold


def glance_reveal_mask(first_pass: Tensor, gold: Tensor, pad: int, ratio: float, generator=None):
    """GLAT's glancing: reveal floor(ratio * hamming) random valid block positions.

    first_pass, gold (B, k) -> (reveal (B, k) bool, n_wrong (B,), n_reveal (B,)).
    Only non-pad gold positions are counted or revealed.
    """
    valid = gold.ne(pad)
    n_wrong = (first_pass.ne(gold) & valid).sum(1)
    n_reveal = (n_wrong.to(torch.float64) * ratio).floor().long()
    scores = torch.rand(gold.shape, generator=generator).to(gold.device)
    scores = scores.masked_fill(~valid, 2.0)  # invalid positions rank last
    ranks = scores.argsort(dim=1).argsort(dim=1)
    reveal = (ranks < n_reveal[:, None]) & valid
    return reveal, n_wrong, n_reveal


def glance_ratio(num_updates: int, start: float, end: float, anneal_updates: int) -> float:
    """Linear schedule from ``start`` (update 0) to ``end`` (update ``anneal_updates`` and
    after); without a schedule length (``anneal_updates <= 0``) the ratio stays ``start``."""
    if anneal_updates <= 0:
        return start
    progress = min(max(num_updates, 0) / anneal_updates, 1.0)
    return start + (end - start) * progress
