"""The verifier's k-token incremental forward and its KV cache, rolled back per row.

fairseq's ``TransformerDecoder`` in incremental mode feeds only the *last* input token
and builds no causal mask.  :class:`VerifierCache` feeds a block of ``m`` new tokens per
row in one pass against the cached prefix, then keeps only each row's accepted part.

Two implementations of the layers, same numbers (tests/test_fast_verifier.py):

- ``FastDecoderLayers`` (fast_decoder.py): preallocated key/value buffers written in place
  at per-row offsets, rollback = moving the per-row lengths; used whenever
  ``fast_path_problems`` finds nothing unusual in the decoder (the standard transformer).
- :class:`FairseqLayers`: fairseq's own ``TransformerDecoderLayer`` calls with its
  ``incremental_state``, the fallback for everything else.

Fallback cache layout (self-attention buffers of every layer, fairseq's ``incremental_state``)::

    prev_key / prev_value: (B, heads, T, head_dim)
    row i's valid entries are [0, valid[i]); entries in [valid[i], T) are holes that
    ``prev_key_padding_mask`` (B, T) masks out (None while there are no holes).

Encoder-attention buffers (static keys/values of the source) are never cut, only
reordered when finished rows leave the batch.
"""
from typing import Callable, Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from fairseq.models.transformer import TransformerDecoderBase
from fairseq.modules import SinusoidalPositionalEmbedding
from torch import Tensor, nn

from fairseq_plugins.decoding.built_once import BuiltOnce
from fairseq_plugins.decoding.fast_decoder import FastDecoderLayers, lean_layers
from fairseq_plugins.decoding.linears import float_linear
from fairseq_plugins_compat.errors import PluginError


def check_supported_decoder(decoder):
    """Raise PluginError for decoder features the block forward does not implement."""
    problems = []
    if getattr(decoder, "adaptive_softmax", None) is not None:
        problems.append("adaptive softmax")
    if getattr(decoder, "cross_self_attention", False):
        problems.append("cross-self-attention")
    if not hasattr(decoder, "layers") or not hasattr(decoder, "embed_tokens"):
        problems.append(f"decoder type {type(decoder).__name__} (need a fairseq TransformerDecoder)")
    if problems:
        raise PluginError("the verifier's decoder is not supported by speculative decoding: " + ", ".join(problems))


def embed_positions_at(embed_positions, positions: Tensor) -> Optional[Tensor]:
    """Positional embeddings at explicit fairseq position numbers.

    Args:
        positions: (B, m) long, already offset by ``padding_idx + 1`` as fairseq does.
    Returns:
        (B, m, C) or None when the decoder has no positional embeddings.
    """
    if embed_positions is None:
        return None
    if isinstance(embed_positions, SinusoidalPositionalEmbedding):
        weights = _sinusoidal_rows(embed_positions, int(positions.max()) + 1)
        return weights.index_select(0, positions.reshape(-1)).view(*positions.shape, -1)
    return F.embedding(positions, embed_positions.weight, embed_positions.padding_idx)


def embed_position_range(embed_positions, first: int, count: int) -> Optional[Tensor]:
    """:func:`embed_positions_at` of one row at the consecutive positions first .. first + count - 1: (1, count, C), a
    slice of the table (one row's block needs no index)."""
    if embed_positions is None:
        return None
    if isinstance(embed_positions, SinusoidalPositionalEmbedding):
        weights = _sinusoidal_rows(embed_positions, first + count)
    else:
        weights = embed_positions.weight
    return weights[None, first:first + count]


def _sinusoidal_rows(embed_positions: SinusoidalPositionalEmbedding, needed: int) -> Tensor:
    """The table of a sinusoidal embedding (P, C), grown to at least ``needed`` positions as fairseq grows it."""
    if embed_positions.weights is None or needed > embed_positions.weights.size(0):
        embed_positions.weights = SinusoidalPositionalEmbedding.get_embedding(
            needed, embed_positions.embedding_dim, embed_positions.padding_idx
        )
    return embed_positions.weights.to(embed_positions._float_tensor)


def decoder_input(decoder, tokens: Tensor, positions: Optional[Tensor]) -> Tensor:
    """fairseq's decoder input embedding of tokens (B, m) with their position embeddings (B, m, C) (None: none)
    -> (m, B, C)."""
    x = decoder.embed_scale * decoder.embed_tokens(tokens)
    if decoder.quant_noise is not None:
        x = decoder.quant_noise(x)
    if decoder.project_in_dim is not None:
        x = decoder.project_in_dim(x)
    if positions is not None:
        x = x + positions
    if decoder.layernorm_embedding is not None:
        x = decoder.layernorm_embedding(x)
    return decoder.dropout_module(x).transpose(0, 1)


def decoder_output_states(decoder, x: Tensor) -> Tensor:
    """The last layer's states (m, B, C) -> fairseq's decoder output states (B, m, C): the final layer norm and the
    projection out of the model dimension, where the decoder has them."""
    if decoder.layer_norm is not None:
        x = decoder.layer_norm(x)
    x = x.transpose(0, 1)
    if decoder.project_out_dim is not None:
        x = decoder.project_out_dim(x)
    return x


def block_causal_mask(cached_len: int, m: int, like: Tensor) -> Optional[Tensor]:
    """(m, cached_len + m) additive mask: new token j sees the cache and new tokens <= j."""
    if m == 1:
        return None
    future = torch.triu(torch.ones(m, m, dtype=torch.bool, device=like.device), diagonal=1)
    mask = torch.zeros(m, cached_len + m, dtype=like.dtype, device=like.device)
    mask[:, cached_len:].masked_fill_(future, float("-inf"))
    return mask


def output_layer(decoder, linear: Callable, rows: int = 0) -> Callable[[Tensor], Tensor]:
    """fairseq's ``output_layer`` as a function: states (B, n, C) -> logits (B, n, V), or with ``rows`` > 0 the logits
    of the first ``rows`` dictionary entries only (B, n, rows).  The standard projection (an ``nn.Linear``, no
    adaptive softmax, ``output_layer`` not overridden) runs through ``linear``; otherwise the decoder's own."""
    projection = getattr(decoder, "output_projection", None)
    if (type(decoder).output_layer is TransformerDecoderBase.output_layer and type(projection) is nn.Linear
            and getattr(decoder, "adaptive_softmax", None) is None):
        return linear(projection, rows)
    if rows:
        return lambda x: decoder.output_layer(x)[..., :rows]
    return decoder.output_layer


def cache_holes(valid: Tensor, length: int) -> Optional[Tensor]:
    """Key padding mask (B, T) of a left-aligned cache of T = ``length`` slots whose row i holds ``valid[i]``
    entries (valid: (B,) long): True at the holes [valid[i], T); None when no row has one."""
    holes = torch.arange(length, device=valid.device)[None, :] >= valid[:, None]
    return holes if bool(holes.any()) else None


def cut_back_cache(layers, state: Dict, valid: Tensor, new_valid: Tensor, old_len: int, new_len: int):
    """Cut the self-attention caches of fairseq's ``layers`` in ``state`` (its ``incremental_state``) back after a
    block: row i keeps its old entries [0, valid[i]) and the block's first new_valid[i] - valid[i] entries, which
    start at slot ``old_len``, moved right after the old ones.

    Args:
        valid, new_valid: (B,) long, each row's entries before the block and after the cut.
        old_len: the cache's length before the block; new_len: max(new_valid).
    Each layer's ``prev_key`` / ``prev_value`` (B, heads, old_len + block length, head_dim) become
    (B, heads, new_len, head_dim), its ``prev_key_padding_mask`` :func:`cache_holes` (B, new_len) or None.
    """
    holes = cache_holes(new_valid, new_len)
    index = None  # no old holes: every row's new entries already follow its old ones (a slice)
    if not bool((valid == old_len).all()):
        slots = torch.arange(new_len, device=valid.device)[None, :]  # (1, T')
        index = torch.where(slots < valid[:, None], slots, old_len + slots - valid[:, None])  # (B, T')
        if holes is not None:
            index = index.masked_fill(holes, 0)
    for layer in layers:
        buffer = layer.self_attn._get_input_buffer(state)
        for name in ("prev_key", "prev_value"):
            cache = buffer[name]
            if index is None:
                buffer[name] = cache[:, :, :new_len]
            else:
                buffer[name] = cache.gather(2, index[:, None, :, None].expand(-1, cache.size(1), -1, cache.size(3)))
        buffer["prev_key_padding_mask"] = holes
        layer.self_attn._set_input_buffer(state, buffer)


class FairseqLayers:
    """The decoder layers run by fairseq itself, on its ``incremental_state``; the cache is
    appended at the physical end (``length``) for every row and cut back with a gather."""

    def __init__(self, decoder, encoder_out: Dict):
        self.decoder = decoder
        self.state: Dict[str, Dict[str, Optional[Tensor]]] = {}
        self.encoder_out = encoder_out

    def forward(self, x: Tensor, length: int) -> Tensor:
        """x (m, B, C) after ``length`` physical cache slots -> (m, B, C)."""
        enc = self.encoder_out
        encoder_states = enc["encoder_out"][0] if len(enc["encoder_out"]) > 0 else None
        encoder_mask = enc["encoder_padding_mask"][0] if len(enc["encoder_padding_mask"]) > 0 else None
        attn_mask = block_causal_mask(length, x.size(0), x)
        for layer in self.decoder.layers:
            x, _, _ = layer(x, encoder_states, encoder_mask, self.state, self_attn_mask=attn_mask)
        return x

    def rollback(self, valid: Tensor, new_valid: Tensor, old_len: int, new_len: int):
        """Row i keeps [0, valid[i]) and the block's first new_valid[i] - valid[i] slots,
        which start at physical slot ``old_len`` (:func:`cut_back_cache`)."""
        cut_back_cache(self.decoder.layers, self.state, valid, new_valid, old_len, new_len)

    def keep_rows(self, rows: Tensor, encoder_out: Dict):
        self.decoder.reorder_incremental_state_scripting(self.state, rows)
        self.encoder_out = encoder_out


class VerifierCache:
    """Incremental state of one AT decoder, fed blocks of tokens and cut back per row.

    It owns the decoding positions: row i has ``valid[i]`` tokens in the cache, so the
    next token it is fed is at decoding step ``valid[i]`` (fairseq position
    ``step + padding_idx + 1``).  ``fast=False`` forces the fairseq-layer fallback; ``linear``
    runs the fast layers' and the output layer's ``nn.Linear`` (``linears.float_linear``:
    as fairseq; ``linears.PackedLinears``: float32 with weights packed once); ``built``:
    the generator's ``built_once.BuiltOnce``, which keeps the lean layers' weights from one
    batch to the next.  Every ``forward_block`` is followed by a ``rollback`` (the fast path writes each
    block at the rows' valid lengths, over whatever the last block left there).
    """

    def __init__(self, model, encoder_out: Dict, batch_size: int, device, fast: bool = True,
                 linear: Callable = float_linear, built: Optional[BuiltOnce] = None):
        check_supported_decoder(model.decoder)
        self.model = model
        self.decoder = model.decoder
        self.decoder.set_beam_size(1)  # a beam search before us may have set it: keep_rows reorders by row
        self.encoder_out = encoder_out
        self.valid = torch.zeros(batch_size, dtype=torch.long, device=device)  # (B,) valid entries per row
        self.length = 0  # T, cache length (>= every valid[i]; the fallback's physical length)
        self.block_len = 0  # tokens fed by the last forward_block
        layers = lean_layers(self.decoder, linear, built) if fast else None
        self.fast = layers is not None
        if self.fast:
            self.layers = FastDecoderLayers(layers, encoder_out, batch_size, self.decoder.embed_tokens.weight)
        else:
            self.layers = FairseqLayers(self.decoder, encoder_out)
        self.output_layer = output_layer(self.decoder, linear)
        self._fewest = 0  # min(valid), kept by the fast path

    def steps(self, m: int) -> Tensor:
        """(B, m) decoding step of each token of the next block of ``m``."""
        return self.valid.unsqueeze(1) + torch.arange(m, device=self.valid.device)

    def step_bounds(self, m: int) -> Tuple[int, int]:
        """Host bounds (lowest, highest) of :meth:`steps` (m) (the fast path's are exact)."""
        return self._fewest, self.length + m - 1

    def forward_block(self, tokens: Tensor):
        """Feed ``tokens`` (B, m) after each row's valid cache.

        Returns log-probabilities (B, m, V) in float32, as fairseq's generator sees them,
        and the last decoder states (B, m, C) (before the output projection).
        """
        states = self.decoder_states(tokens)
        return self.log_probs(states), states

    def decoder_states(self, tokens: Tensor, steps: Optional[Tensor] = None,
                       block_visible: Optional[Tensor] = None) -> Tensor:
        """Feed ``tokens`` (B, m) at decoding steps ``steps`` (B, m) (None: :meth:`steps`, a chain) after each row's
        valid cache -> the last decoder states (B, m, C). Inside the block token j sees tokens <= j, or, given
        ``block_visible`` ((m, m) bool, the lean layers only), the tokens it marks (a draft tree's ancestors)."""
        decoder = self.decoder
        first = decoder.padding_idx + 1  # fairseq's position of step 0
        if steps is None and self.fast and tokens.size(0) == 1:  # one row's chain starts at step self.length
            positions = embed_position_range(decoder.embed_positions, self.length + first, tokens.size(1))
        else:
            steps = self.steps(tokens.size(1)) if steps is None else steps
            positions = embed_positions_at(decoder.embed_positions, steps + first)
        x = decoder_input(decoder, tokens, positions)  # (m, B, C)
        if self.fast:
            x = self.layers.forward(x, self.valid, self._fewest, self.length, block_visible=block_visible)
        elif block_visible is not None:
            raise PluginError("a block visibility mask needs the verifier's lean layers (fast_decoder)")
        else:
            x = self.layers.forward(x, self.length)
        x = decoder_output_states(decoder, x)
        self.length += tokens.size(1)
        self.block_len = tokens.size(1)
        return x

    def log_probs(self, states: Tensor) -> Tensor:
        """Decoder states (B, n, C) -> log-probabilities (B, n, V) in float32."""
        return F.log_softmax(self.output_layer(states).float(), dim=-1)

    def rollback(self, kept: Tensor):
        """Keep, per row, the first ``kept[i]`` of the tokens the last ``forward_block`` fed.

        Args:
            kept: (B,) long, 0 <= kept[i] <= block length.
        """
        new_valid = self.valid + kept
        new_len = int(new_valid.max())
        if self.fast:
            self._fewest = int(new_valid.min())
        else:
            self.layers.rollback(self.valid, new_valid, self.length - self.block_len, new_len)
        self.valid = new_valid
        self.length = new_len
        self.block_len = 0

    def keep_rows(self, rows: Tensor):
        """Keep only batch rows ``rows`` (1-D long): finished rows leave the batch."""
        self.encoder_out = self.model.encoder.reorder_encoder_out(self.encoder_out, rows)
        if self.fast:
            self.layers.keep_rows(rows)
        else:
            self.layers.keep_rows(rows, self.encoder_out)
        self.valid = self.valid.index_select(0, rows)  # the fallback's physical length stays
        if self.fast and rows.numel() > 0:
            self._fewest, self.length = int(self.valid.min()), int(self.valid.max())
