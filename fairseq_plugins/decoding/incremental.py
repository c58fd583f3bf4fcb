"""The verifier's k-token incremental forward and its KV cache, rolled back per row.

fairseq's ``TransformerDecoder`` in incremental mode feeds only the *last* input token
and builds no causal mask.  :class:`VerifierCache` feeds a block of ``m`` new tokens per
row in one pass against the cached prefix, then keeps only each row's accepted part.

Cache layout (self-attention buffers of every layer, fairseq's ``incremental_state``)::

    prev_key / prev_value: (B, heads, T, head_dim)
    row i's valid entries are [0, valid[i]); entries in [valid[i], T) are holes that
    ``prev_key_padding_mask`` (B, T) masks out (None while there are no holes).

Encoder-attention buffers (static keys/values of the source) are never cut, only
reordered when finished rows leave the batch.
"""
from typing import Dict, Optional

import torch
import torch.nn.functional as F
from fairseq.modules import SinusoidalPositionalEmbedding
from torch import Tensor

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
        needed = int(positions.max()) + 1
        if embed_positions.weights is None or needed > embed_positions.weights.size(0):
            embed_positions.weights = SinusoidalPositionalEmbedding.get_embedding(
                needed, embed_positions.embedding_dim, embed_positions.padding_idx
            )
        weights = embed_positions.weights.to(embed_positions._float_tensor)
        return weights.index_select(0, positions.reshape(-1)).view(*positions.shape, -1)
    return F.embedding(positions, embed_positions.weight, embed_positions.padding_idx)


def block_causal_mask(cached_len: int, m: int, like: Tensor) -> Optional[Tensor]:
    """(m, cached_len + m) additive mask: new token j sees the cache and new tokens <= j."""
    if m == 1:
        return None
    future = torch.triu(torch.ones(m, m, dtype=torch.bool, device=like.device), diagonal=1)
    mask = torch.zeros(m, cached_len + m, dtype=like.dtype, device=like.device)
    mask[:, cached_len:].masked_fill_(future, float("-inf"))
    return mask


class VerifierCache:
    """Incremental state of one AT decoder, fed blocks of tokens and cut back per row.

    It owns the decoding positions: row i has ``valid[i]`` tokens in the cache, so the
    next token it is fed is at decoding step ``valid[i]`` (fairseq position
    ``step + padding_idx + 1``).
    """

    ATTN_STATE = "attn_state"  # fairseq's MultiheadAttention incremental-state key

    def __init__(self, model, encoder_out: Dict, batch_size: int, device):
        check_supported_decoder(model.decoder)
        self.model = model
        self.decoder = model.decoder
        self.decoder.set_beam_size(1)  # a beam search before us may have set it: keep_rows reorders by row
        self.encoder_out = encoder_out
        self.state: Dict[str, Dict[str, Optional[Tensor]]] = {}
        self.valid = torch.zeros(batch_size, dtype=torch.long, device=device)  # (B,) valid entries per row
        self.length = 0  # T, physical cache length (>= every valid[i])
        self.block_len = 0  # tokens fed by the last forward_block

    def steps(self, m: int) -> Tensor:
        """(B, m) decoding step of each token of the next block of ``m``."""
        return self.valid.unsqueeze(1) + torch.arange(m, device=self.valid.device)

    def forward_block(self, tokens: Tensor):
        """Feed ``tokens`` (B, m) after each row's valid cache.

        Returns log-probabilities (B, m, V) in float32, as fairseq's generator sees them,
        and the last decoder states (B, m, C) (before the output projection).
        """
        decoder = self.decoder
        m = tokens.size(1)
        x = decoder.embed_scale * decoder.embed_tokens(tokens)
        if decoder.quant_noise is not None:
            x = decoder.quant_noise(x)
        if decoder.project_in_dim is not None:
            x = decoder.project_in_dim(x)
        pos = embed_positions_at(decoder.embed_positions, self.steps(m) + decoder.padding_idx + 1)
        if pos is not None:
            x = x + pos
        if decoder.layernorm_embedding is not None:
            x = decoder.layernorm_embedding(x)
        x = decoder.dropout_module(x).transpose(0, 1)  # (m, B, C)

        enc = self.encoder_out
        encoder_states = enc["encoder_out"][0] if len(enc["encoder_out"]) > 0 else None
        encoder_mask = enc["encoder_padding_mask"][0] if len(enc["encoder_padding_mask"]) > 0 else None
        attn_mask = block_causal_mask(self.length, m, x)
        for layer in decoder.layers:
            x, _, _ = layer(x, encoder_states, encoder_mask, self.state, self_attn_mask=attn_mask)
        if decoder.layer_norm is not None:
            x = decoder.layer_norm(x)
        x = x.transpose(0, 1)
        if decoder.project_out_dim is not None:
            x = decoder.project_out_dim(x)
        self.length += m
        self.block_len = m
        return F.log_softmax(decoder.output_layer(x).float(), dim=-1), x

    def rollback(self, kept: Tensor):
        """Keep, per row, the first ``kept[i]`` of the tokens the last ``forward_block`` fed.

        Args:
            kept: (B,) long, 0 <= kept[i] <= block length.
        """
        old_len = self.length - self.block_len  # where the block starts physically
        new_valid = self.valid + kept
        new_len = int(new_valid.max())
        slots = torch.arange(new_len, device=kept.device).unsqueeze(0)  # (1, T')
        holes = slots >= new_valid.unsqueeze(1)  # (B, T')
        contiguous = bool((self.valid == old_len).all())
        if not contiguous:  # row i: [0, valid_i) then the block's [old_len, old_len + kept_i)
            valid = self.valid.unsqueeze(1)
            index = torch.where(slots < valid, slots, old_len + slots - valid).masked_fill(holes, 0)
        for layer in self.decoder.layers:
            buffer = layer.self_attn.get_incremental_state(self.state, self.ATTN_STATE)
            for name in ("prev_key", "prev_value"):
                cache = buffer[name]  # (B, heads, T, head_dim)
                if contiguous:
                    buffer[name] = cache[:, :, :new_len]
                else:
                    expanded = index[:, None, :, None].expand(-1, cache.size(1), -1, cache.size(3))
                    buffer[name] = cache.gather(2, expanded)
            buffer["prev_key_padding_mask"] = holes if bool(holes.any()) else None
            layer.self_attn.set_incremental_state(self.state, self.ATTN_STATE, buffer)
        self.valid = new_valid
        self.length = new_len
        self.block_len = 0

    def keep_rows(self, rows: Tensor):
        """Keep only batch rows ``rows`` (1-D long): finished rows leave the batch."""
        self.decoder.reorder_incremental_state_scripting(self.state, rows)
        self.encoder_out = self.model.encoder.reorder_encoder_out(self.encoder_out, rows)
        self.valid = self.valid.index_select(0, rows)  # the physical length stays
