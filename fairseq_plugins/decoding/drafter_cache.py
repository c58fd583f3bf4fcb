"""KV cache of the block NAT drafter's prefix, kept across speculative iterations.

With ``prefix_causal`` (see ``models.drafter_blocks``) a prefix token never sees the queries
nor later prefix tokens, so its states depend on the source and the tokens before it
only: they can be computed once, when the token is accepted, and reused by every later
proposal.  :class:`DrafterCache` feeds, per proposal, one block through the decoder::

    columns 0 .. M-1      each row's new prefix tokens tokens[fed_i:length_i], right-padded
    columns M .. M+Q-1    the Q mask queries (``n_queries``, as the uncached forward runs)

through the decoder layers, then keeps only the new prefix tokens.  The last layer computes the new prefix
tokens' keys and values only: their output there is read by nobody (only the queries reach the output layer).
A query's input depends on the source and its target position only (the mask symbol or the soft copy, plus its
position embedding), so the queries' embeddings are computed once per batch for every target position
(``QueryTable``) and each proposal gathers its rows'.  Two implementations
of the layers, same numbers (tests/test_drafter_cache.py):

- the lean layers of ``fast_decoder`` (the verifier's): preallocated buffers, the
  block written at each row's ``fed_i``; keeping the new prefix tokens is moving ``fed``
  (the queries' and pads' slots are overwritten by the next block).  Used whenever
  ``fast_path_problems`` finds nothing unusual in the layers.
- fairseq's own layers on its ``incremental_state``, the fallback, laid out as below.

Fallback cache layout (every layer's ``prev_key`` / ``prev_value``)::

    (B, heads, T, head_dim), row i's valid entries are [0, fed_i) (left-aligned);
    entries in [fed_i, T) are holes masked by ``prev_key_padding_mask`` (None if none).

After each forward the query and pad entries are dropped by a gather that moves each
row's new tokens right after its old ones (a slice when no row had holes), so T stays
the longest accepted prefix and attention never pays for holes.  Encoder-attention
buffers (the source keys/values) are computed once and only reordered.
"""
import functools
from typing import Dict, Optional

import torch
from torch import Tensor

from fairseq_plugins.decoding.fast_decoder import FastDecoderLayers, lean_layers
from fairseq_plugins.decoding.incremental import (cache_holes, cut_back_cache, decoder_output_states,
                                                  embed_position_range, embed_positions_at, output_layer)
from fairseq_plugins.decoding.linears import float_linear
from fairseq_plugins.models import drafter_blocks
from fairseq_plugins.models.block_drafter_decoder import count_queries
from fairseq_plugins_compat.errors import PluginError


def check_cacheable(decoder):
    """Raise PluginError for drafters whose prefix states cannot be cached."""
    if not getattr(decoder, "prefix_causal", False):
        raise PluginError("the drafter's prefix attention is bidirectional: its prefix states change with every "
                          "new token and cannot be cached (train it with --prefix-attention causal)")
    if getattr(decoder, "cross_self_attention", False):
        raise PluginError("the drafter cache does not support --cross-self-attention")


def reorder_encoder_out(encoder_out: Dict, rows: Tensor) -> Dict:
    """fairseq's encoder output dict restricted to batch rows ``rows`` (not in place)."""
    batch_dim = {"encoder_out": 1, "encoder_states": 1}
    return {name: [t.index_select(batch_dim.get(name, 0), rows) if torch.is_tensor(t) else t for t in values]
            for name, values in encoder_out.items()}


def _fast_layers(decoder, encoder_out: Dict, batch_size: int, linear, built):
    """The lean layers of ``fast_decoder`` for the drafter, or None when they do
    not support its layers (fairseq's own layers then run)."""
    layers = lean_layers(decoder, linear, built)
    return None if layers is None else FastDecoderLayers(layers, encoder_out, batch_size, decoder.embed_tokens.weight)


def prefix_positions(fed: Tensor, n_new: Tensor, n_prefix: int, pad: int) -> Tensor:
    """fairseq position numbers (B, M) of each row's new prefix tokens, right-padded: new
    token j of row i is token fed_i + j of its row (real tokens counted from 1, + pad);
    pad slots get the pad position."""
    offsets = torch.arange(n_prefix, device=fed.device)[None, :]
    return (fed[:, None] + offsets + 1 + pad).masked_fill(offsets >= n_new[:, None], pad)


class QueryTable:
    """Embeddings (B, P, C) of a mask query at every target index p < P, for a batch.

    The query predicting target token p (0-based; column p + 1 of the core's tokens, whose
    column 0 is EOS) is the mask symbol's embedding, or with ``soft_copy`` the source
    embeddings' soft copy at p, plus position p + 2 + pad, then the embedding layer norm:
    ``BlockDrafterDecoder.embed_block`` for a mask query, computed once instead of per proposal.
    """

    def __init__(self, decoder):
        self.decoder = decoder
        self.table: Optional[Tensor] = None

    def gather(self, first: Tensor, last_first: int, n_queries: int, encoder_out: Dict) -> Tensor:
        """(B, Q, C) embeddings of queries first[i] .. first[i] + Q - 1 of each row; first (B,),
        ``last_first`` = max(first), which the caller already knows (one host sync fewer)."""
        needed = last_first + n_queries
        if self.table is None or self.table.size(1) < needed:
            grown = 32 if self.table is None else 2 * self.table.size(1)
            self.table = self.embed(first.size(0), max(needed, min(grown, self.decoder.max_positions() - 1)), encoder_out)
        if first.size(0) == 1:  # one row: its queries are a slice of the table
            return self.table[:, last_first:needed]
        index = first[:, None] + torch.arange(n_queries, device=first.device)[None, :]  # (B, Q)
        return self.table.gather(1, index[:, :, None].expand(-1, -1, self.table.size(2)))

    def keep_rows(self, rows: Tensor):
        if self.table is not None:
            self.table = self.table.index_select(0, rows)

    def embed(self, batch_size: int, n_positions: int, encoder_out: Dict) -> Tensor:
        """(B, P, C) embeddings of the queries at target indices 0 .. P - 1 of every row (``encoder_out``: B rows)."""
        decoder = self.decoder
        device = decoder.embed_tokens.weight.device
        targets = torch.arange(n_positions, device=device)[None, :].expand(batch_size, -1)  # (B, P)
        if decoder.soft_copy:
            x = drafter_blocks.soft_copy(encoder_out["encoder_embedding"][0], encoder_out["encoder_padding_mask"][0],
                                         targets, decoder.copy_temperature).to(decoder.embed_tokens.weight)
        else:
            x = decoder.embed_scale * decoder.embed_tokens(torch.full_like(targets, decoder.mask_idx))
        return embed_at(decoder, x, targets + 2 + decoder.padding_idx)


def embed_at(decoder, x: Tensor, positions: Tensor) -> Tensor:
    """``embed_block`` after the token embedding, x (B, m, C), at explicit fairseq positions (B, m)."""
    return decoder.finish_embedding(x, embed_positions_at(decoder.embed_positions, positions))


def block_attention_bias(n_prefix: int, n_queries: int, like: Tensor) -> Optional[Tensor]:
    """Additive self-attention mask (M+Q, M+Q) inside the block: 0 = may attend, -inf =
    may not.  Prefix tokens attend causally and never to queries, queries to the whole
    block; None when the block has queries only."""
    if n_prefix == 0:
        return None
    allowed = drafter_blocks.block_attention_mask(n_prefix, n_queries, prefix_causal=True, device=like.device)
    return torch.zeros(allowed.shape, dtype=like.dtype, device=like.device).masked_fill_(~allowed, float("-inf"))


class DrafterCache:
    """Incremental prefix state of one BlockDrafterDecoder for a batch.

    Args:
        decoder: a ``BlockDrafterDecoder`` with causal prefix attention (eval mode)
        encoder_out: the drafter encoder's output dict for the batch
        batch_size: B
        vocab_limit: > 0: propose only among the first ``vocab_limit`` dictionary entries
        fast: False forces fairseq's own layers
        linear: how the lean layers and the output layer run an ``nn.Linear``
            (``linears.float_linear``, the default, or what ``specdec.drafter_linear`` returns)
        built: the caller's ``built_once.BuiltOnce`` (the lean layers' weights, kept from one
            batch to the next), or None
        check_prefix: compare, at every proposal, the cached tokens with the caller's (2 host
            synchronisations and ~14 tensor operations); False for a caller whose accepted
            tokens are final by contract (the speculative core's)
    """

    def __init__(self, decoder, encoder_out: Dict, batch_size: int, vocab_limit: int = 0, fast: bool = True,
                 linear=None, built=None, check_prefix: bool = True):
        check_cacheable(decoder)
        self.check_prefix = check_prefix
        self.decoder = decoder
        self.encoder_out = encoder_out
        self.state: Dict[str, Dict[str, Optional[Tensor]]] = {}
        linear = float_linear if linear is None else linear
        self.layers = _fast_layers(decoder, encoder_out, batch_size, linear, built) if fast else None
        self.project = output_layer(decoder, linear, vocab_limit)
        device = decoder.embed_tokens.weight.device
        self.fed = torch.zeros(batch_size, dtype=torch.long, device=device)  # (B,) tokens in the cache
        self.tokens = torch.zeros(batch_size, 0, dtype=torch.long, device=device)  # (B, T) what was fed (if checked)
        self.length = 0  # T, physical cache length == max(fed)
        self.queries = QueryTable(decoder)
        self.banned = torch.tensor([b for b in decoder.banned if not vocab_limit or b < vocab_limit], dtype=torch.long,
                                   device=device)
        self.block_biases: Dict[tuple, Optional[Tensor]] = {}  # (M, Q, dtype, device) -> additive mask (fallback)

    @torch.no_grad()
    def propose_log_probs(self, tokens: Tensor, lengths: Tensor, k: int) -> Tensor:
        """Log-probs (B, k, V) float32 of the next k tokens, as the uncached
        ``decoder.propose_log_probs(encoder_out, tokens[:, :lengths.max()], lengths, k)``.

        tokens (B, >= max length): accepted tokens, column 0 = eos, pad after ``lengths``;
        lengths (B,): every row's length, never below what an earlier call saw.
        """
        return torch.log_softmax(self.propose_logits(tokens, lengths, k), dim=-1)

    @torch.no_grad()
    def propose_logits(self, tokens: Tensor, lengths: Tensor, k: int) -> Tensor:
        """Logits (B, k, V) float32 of the next k tokens, banned tokens at -inf (their
        argmax is the drafts: the log-softmax is only needed for probabilities)."""
        return self.propose_states_and_logits(tokens, lengths, k)[1]

    @torch.no_grad()
    def propose_states_and_logits(self, tokens: Tensor, lengths: Tensor, k: int):
        """(the k queries' states (B, k, C) before the output layer, ``propose_logits``)."""
        decoder = self.decoder
        longest = int(lengths.max())
        n_queries = count_queries(decoder, longest, k)
        if lengths.size(0) != self.fed.size(0):
            raise PluginError(f"the drafter cache holds {self.fed.size(0)} rows, got {lengths.size(0)} "
                              "(call keep_rows when rows leave the batch)")
        if self.check_prefix:
            self._check_prefix_grew(tokens, lengths)
        n_new = lengths - self.fed
        if lengths.size(0) == 1:  # one row: it has fed ``self.length`` tokens
            n_prefix, fewest = longest - self.length, self.length
        else:
            n_prefix, fewest = int(n_new.max()), int(self.fed.min())
        x = self.queries.gather(lengths - 1, longest - 1, n_queries, self.encoder_out)  # (B, Q, C)
        key_padding = None
        if n_prefix > 0:
            prefix, key_padding = self._embed_prefix(tokens, n_new, n_prefix, n_queries)
            x = torch.cat([prefix, x], dim=1)
        x = x.transpose(0, 1)  # (M+Q, B, C)
        if self.layers is not None:
            visible = self._block_visible(n_prefix, n_queries, x.device)
            queries = self.layers.forward(x, self.fed, fewest, self.length, visible, block_padding=key_padding,
                                          outputs=n_queries)  # the prefix tokens' last layer: keys and values only
            self.fed = self.fed + n_new  # the queries and pads after them are overwritten next time
            self.length = longest
        else:
            queries = self._fairseq_layers(x, n_prefix, n_queries, key_padding)[n_prefix:]
            self._keep_new_prefix(n_new, n_prefix + n_queries)
        if self.check_prefix:
            self.tokens = tokens[:, :longest].clone()
        states = decoder_output_states(decoder, queries if k == n_queries else queries[:k])
        return states, self._logits(states)

    def _fairseq_layers(self, x: Tensor, n_prefix: int, n_queries: int, key_padding: Optional[Tensor]) -> Tensor:
        """The fallback: fairseq's own layers on its ``incremental_state``, x (M+Q, B, C)."""
        bias = self._attention_bias(n_prefix, n_queries, x)
        enc = self.encoder_out
        enc_states = enc["encoder_out"][0] if enc["encoder_out"] else None
        enc_mask = enc["encoder_padding_mask"][0] if enc["encoder_padding_mask"] else None
        for layer in self.decoder.layers:
            x, _, _ = layer(x, enc_states, enc_mask, self.state, self_attn_mask=bias,
                            self_attn_padding_mask=key_padding)
        return x

    @staticmethod
    @functools.lru_cache(maxsize=1024)
    def _block_visible(n_prefix: int, n_queries: int, device) -> Tensor:
        """(M+Q, M+Q) bool, True = may attend, inside the block (the lean path's mask; made
        once per process for each shape, never written to)."""
        return drafter_blocks.block_attention_mask(n_prefix, n_queries, prefix_causal=True, device=device)

    def _attention_bias(self, n_prefix: int, n_queries: int, like: Tensor) -> Optional[Tensor]:
        """Additive mask (M+Q, T+M+Q) of the next forward: the whole cache is visible (its
        holes are in the key padding mask), the block as ``block_attention_bias``."""
        key = (n_prefix, n_queries, like.dtype, like.device)
        if key not in self.block_biases:
            self.block_biases[key] = block_attention_bias(n_prefix, n_queries, like)
        block = self.block_biases[key]
        if block is None or self.length == 0:
            return block
        return torch.cat([block.new_zeros(block.size(0), self.length), block], dim=1)

    def _check_prefix_grew(self, tokens: Tensor, lengths: Tensor):
        """The cached tokens must still be each row's accepted prefix."""
        if bool(((lengths < self.fed) | (lengths < 1)).any()):
            raise PluginError("a row's accepted prefix shrank below what the drafter cache holds")
        cached = torch.arange(self.length, device=tokens.device)[None, :] < self.fed[:, None]
        if bool((tokens[:, :self.length].ne(self.tokens) & cached).any()):
            raise PluginError("accepted tokens already in the drafter cache changed (accepted tokens must be final)")

    def _embed_prefix(self, tokens: Tensor, n_new: Tensor, n_prefix: int, n_queries: int):
        """Embeddings (B, M, C) of each row's new prefix tokens tokens[fed_i:length_i],
        right-padded, and the block's key padding mask (B, M+Q), True at pad slots (None
        without pad slots: attention then skips masking)."""
        decoder = self.decoder
        if tokens.size(0) == 1:  # one row: its new tokens and their positions are slices
            new_tokens = tokens[:, self.length:self.length + n_prefix]
            x = decoder.embed_scale * decoder.embed_tokens(new_tokens)
            positions = embed_position_range(decoder.embed_positions, self.length + 1 + decoder.padding_idx, n_prefix)
            return decoder.finish_embedding(x, positions), None
        offsets = torch.arange(n_prefix, device=tokens.device)[None, :]
        index = (self.fed[:, None] + offsets).clamp(max=tokens.size(1) - 1)
        is_pad = offsets >= n_new[:, None]
        new_tokens = tokens.gather(1, index).masked_fill(is_pad, decoder.padding_idx)
        key_padding = None
        if bool(is_pad.any()):
            key_padding = torch.cat([is_pad, is_pad.new_zeros(tokens.size(0), n_queries)], dim=1)
        x = decoder.embed_scale * decoder.embed_tokens(new_tokens)
        positions = prefix_positions(self.fed, n_new, n_prefix, decoder.padding_idx)
        return embed_at(decoder, x, positions), key_padding

    def _logits(self, x: Tensor) -> Tensor:
        """Query states (B, k, C) before the output layer -> logits (B, k, V), float32, banned tokens at -inf.  Only the k
        returned queries reach the output layer; with a ``vocab_limit`` N only its first N rows
        (fairseq dictionaries are sorted by frequency), V = N (the log-softmax renormalises over them)."""
        logits = self.project(x).float()
        return logits.index_fill_(-1, self.banned, float("-inf"))

    def _keep_new_prefix(self, n_new: Tensor, block_len: int):
        """Cut the block just fed (``block_len`` entries after the old cache) back to each
        row's ``n_new[i]`` new prefix tokens, left-aligned after its ``fed[i]`` old ones."""
        new_fed = self.fed + n_new
        new_len = int(new_fed.max())
        cut_back_cache(self.decoder.layers, self.state, self.fed, new_fed, self.length, new_len)
        self.fed = new_fed
        self.length = new_len

    def keep_rows(self, rows: Tensor):
        """Keep only batch rows ``rows`` (R,) long, in that order: finished rows leave.

        The self-attention buffers are also cut to the longest row left."""
        self.encoder_out = reorder_encoder_out(self.encoder_out, rows)
        self.queries.keep_rows(rows)
        self.fed = self.fed.index_select(0, rows)
        self.length = int(self.fed.max()) if rows.numel() > 0 else 0
        if self.check_prefix:
            self.tokens = self.tokens.index_select(0, rows)[:, :self.length]
        if self.layers is not None:
            self.layers.keep_rows(rows)
            return
        holes = cache_holes(self.fed, self.length)
        for layer in self.decoder.layers:
            encoder_attn = getattr(layer, "encoder_attn", None)
            if encoder_attn is not None:
                buffer = encoder_attn._get_input_buffer(self.state)
                encoder_attn._set_input_buffer(self.state, {
                    name: None if value is None else value.index_select(0, rows) for name, value in buffer.items()})
            buffer = layer.self_attn._get_input_buffer(self.state)
            if "prev_key" in buffer:
                for name in ("prev_key", "prev_value"):
                    buffer[name] = buffer[name].index_select(0, rows)[:, :, :self.length]
                buffer["prev_key_padding_mask"] = holes
                layer.self_attn._set_input_buffer(self.state, buffer)
