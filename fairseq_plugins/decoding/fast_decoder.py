"""A lean inference forward of fairseq's decoder layers over preallocated key/value buffers.

fairseq's ``MultiheadAttention`` in incremental mode concatenates the whole cache with the
new keys on every call, and a block verifier then has to cut every cache back.  Here each
layer owns buffers written in place::

    FastLayer.key / .value: (B, heads, capacity, head_dim), zero-initialised
    row i's block of m tokens is written at slots [valid[i], valid[i] + m);
    slots past a row's own tokens are masked, never read as data.

so rolling back is moving the per-row lengths (the caller's ``valid``) and nothing else.
The encoder keys/values are projected once per batch.

The arithmetic is fairseq 0.12.2's own incremental path (which an incremental
``MultiheadAttention`` always takes, never ``F.multi_head_attention_forward``): q/k/v
linear projections, attention softmax(q k^T * head_dim ** -0.5) v with hidden slots
masked, output projection; the layer's residuals and layer norms as configured (pre- or
post-norm).  Dropout is the identity (eval).  The attention is one call of torch's
``scaled_dot_product_attention`` instead of fairseq's scale / bmm / -inf / float32
softmax / bmm: the same numbers to rounding (in a float64 model fairseq's float32 softmax
is the coarser one), with about ten fewer operations per attention.
"""
from typing import List, Optional

import torch
import torch.nn.functional as F
from fairseq.modules import LayerDropModuleList
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase
from torch import Tensor, nn

from fairseq_plugins.decoding.built_once import BuiltOnce
from fairseq_plugins.decoding.layer_parts import attend, attention_problems, plain_norm, split_heads
from fairseq_plugins.decoding.linears import float_linear

INITIAL_CAPACITY = 32


def _layer_problems(layer) -> List[str]:
    if type(layer).forward is not TransformerDecoderLayerBase.forward:
        return [f"decoder layer type {type(layer).__name__}"]
    problems = []
    if layer.cross_self_attention or not layer.self_attn.self_attention:
        problems.append("cross-self-attention")
    if layer.quant_noise or type(layer.fc1) is not nn.Linear or type(layer.fc2) is not nn.Linear:
        problems.append("quant noise")
    if any(p is not None for p in (layer.c_attn, layer.attn_ln, layer.ffn_layernorm, layer.w_resid)):
        problems.append("scaled heads/attention/fc/residuals")
    if layer.onnx_trace or layer.dropout_module.apply_during_inference \
            or layer.activation_dropout_module.apply_during_inference:
        problems.append("onnx tracing or inference dropout")
    problems += attention_problems(layer.self_attn, "self-attention")
    if layer.encoder_attn is not None:
        problems += attention_problems(layer.encoder_attn, "encoder attention")
    return problems


def fast_path_problems(decoder) -> List[str]:
    """Why :class:`FastDecoderLayers` cannot run ``decoder``'s layers (empty list: it can)."""
    if decoder.training:
        return ["training mode"]
    if isinstance(decoder.layers, LayerDropModuleList):
        return ["layerdrop"]
    problems = []
    for layer in decoder.layers:
        problems += [p for p in _layer_problems(layer) if p not in problems]
    return problems


class LayerWeights:
    """One ``TransformerDecoderLayer``'s weights as plain functions (built once per model: :func:`lean_layers`)."""

    def __init__(self, layer, linear=float_linear):
        sa = layer.self_attn
        self.heads, self.head_dim, self.scaling = sa.num_heads, sa.head_dim, sa.scaling
        self.normalize_before = layer.normalize_before
        self.self_q, self.self_k, self.self_v = linear(sa.q_proj), linear(sa.k_proj), linear(sa.v_proj)
        self.self_out = linear(sa.out_proj)
        self.self_norm = plain_norm(layer.self_attn_layer_norm)
        self.has_encoder_attn = layer.encoder_attn is not None
        if self.has_encoder_attn:
            self.encoder_q = linear(layer.encoder_attn.q_proj)
            self.encoder_out_proj = linear(layer.encoder_attn.out_proj)
            self.encoder_k, self.encoder_v = linear(layer.encoder_attn.k_proj), linear(layer.encoder_attn.v_proj)
            self.encoder_norm = plain_norm(layer.encoder_attn_layer_norm)
        self.fc1, self.fc2, self.activation = linear(layer.fc1), linear(layer.fc2), layer.activation_fn
        self.final_norm = plain_norm(layer.final_layer_norm)


def lean_layers(decoder, linear=float_linear, built: Optional[BuiltOnce] = None) -> Optional[List[LayerWeights]]:
    """The decoder's layers as :class:`LayerWeights` (reused from ``built`` while the decoder is
    unchanged), or None when :func:`fast_path_problems` finds something they do not run."""
    def build():
        return None if fast_path_problems(decoder) else [LayerWeights(layer, linear) for layer in decoder.layers]
    return build() if built is None else built.get("decoder layers", decoder, linear, build)


class FastLayer:
    """One decoder layer's key/value buffers for a batch, run with its :class:`LayerWeights`."""

    def __init__(self, weights: LayerWeights, batch_size: int, like: Tensor):
        self.weights = weights
        shape = (batch_size, weights.heads, INITIAL_CAPACITY, weights.head_dim)
        self.key = like.new_zeros(shape)
        self.value = like.new_zeros(shape)
        self.encoder_key: Optional[Tensor] = None  # (B, H, S, d)
        self.encoder_value: Optional[Tensor] = None

    def project_encoder(self, encoder_states: Optional[Tensor]):
        """Encoder keys/values (S, B, C) -> (B, H, S, d), once per batch."""
        w = self.weights
        if not w.has_encoder_attn or encoder_states is None:
            return
        self.encoder_key = split_heads(w.encoder_k(encoder_states), w.heads, w.head_dim).contiguous()
        self.encoder_value = split_heads(w.encoder_v(encoder_states), w.heads, w.head_dim).contiguous()

    def ensure_capacity(self, needed: int):
        capacity = self.key.size(2)
        if needed <= capacity:
            return
        capacity = max(needed, 2 * capacity)
        for name in ("key", "value"):
            old = getattr(self, name)
            new = old.new_zeros(old.size(0), old.size(1), capacity, old.size(3))
            new[:, :, : old.size(2)] = old
            setattr(self, name, new)

    def keep_rows(self, rows: Tensor):
        self.key, self.value = self.key.index_select(0, rows), self.value.index_select(0, rows)
        if self.encoder_key is not None:
            self.encoder_key = self.encoder_key.index_select(0, rows)
            self.encoder_value = self.encoder_value.index_select(0, rows)

    def self_attention(self, x: Tensor, write, length: int, visible: Optional[Tensor], first_out: int = 0) -> Tensor:
        """x (m, B, C) -> (m - first_out, B, C): the attention output of the block's tokens from ``first_out`` on;
        ``write(buffer, new)`` stores the keys and values (B, H, m, d) of all m at each row's slots."""
        w = self.weights
        for buffer, projection in ((self.key, w.self_k), (self.value, w.self_v)):
            write(buffer, split_heads(projection(x), w.heads, w.head_dim))
        if first_out:
            x, visible = x[first_out:], None if visible is None else visible[..., first_out:, :]
        q = split_heads(w.self_q(x), w.heads, w.head_dim)
        out = attend(q, self.key[:, :, :length], self.value[:, :, :length], visible, w.scaling)
        return w.self_out(out)

    def encoder_attention(self, x: Tensor, encoder_visible: Optional[Tensor]) -> Tensor:
        w = self.weights
        q = split_heads(w.encoder_q(x), w.heads, w.head_dim)
        return w.encoder_out_proj(attend(q, self.encoder_key, self.encoder_value, encoder_visible, w.scaling))

    def forward(self, x: Tensor, write, length: int, self_visible, encoder_visible, first_out: int = 0) -> Tensor:
        """fairseq's ``TransformerDecoderLayerBase.forward`` at inference, x (m, B, C) -> (m - first_out, B, C):
        every token's keys and values are cached, the output is computed for the tokens from ``first_out`` on."""
        w = self.weights
        pre = w.normalize_before
        residual = x[first_out:]
        x = residual + self.self_attention(w.self_norm(x) if pre else x, write, length, self_visible, first_out)
        if not pre:
            x = w.self_norm(x)
        if self.encoder_key is not None:
            residual = x
            x = residual + self.encoder_attention(w.encoder_norm(x) if pre else x, encoder_visible)
            if not pre:
                x = w.encoder_norm(x)
        residual = x
        h = w.final_norm(x) if pre else x
        h = w.fc2(w.activation(w.fc1(h)))
        x = residual + h
        return x if pre else w.final_norm(x)


class FastDecoderLayers:
    """All decoder layers, fed blocks of m tokens per row at per-row offsets.

    The caller owns the per-row lengths: ``forward`` writes row i's block at slots
    [valid[i], valid[i] + m) of every buffer, and the caller then adds what it keeps.
    ``layers``: the decoder's :func:`lean_layers`; ``like``: a tensor of the buffers' dtype and device.
    """

    def __init__(self, layers: List[LayerWeights], encoder_out, batch_size: int, like: Tensor):
        self.layers = [FastLayer(weights, batch_size, like) for weights in layers]
        states = encoder_out["encoder_out"][0] if len(encoder_out["encoder_out"]) > 0 else None
        masks = encoder_out["encoder_padding_mask"]
        for layer in self.layers:
            layer.project_encoder(states)
        self.encoder_visible = None  # (B, 1, 1, S) bool, True at real tokens; None when no source position is padding
        if len(masks) > 0 and bool(masks[0].any()):
            self.encoder_visible = ~masks[0].to(torch.bool)[:, None, None, :]

    def forward(self, x: Tensor, valid: Tensor, low: int, high: int, block_visible: Optional[Tensor] = None,
                block_padding: Optional[Tensor] = None, outputs: int = 0) -> Tensor:
        """x (m, B, C) at steps valid[i] + j; every row has between ``low`` and ``high``
        cached tokens. Returns (m, B, C), or with ``outputs`` > 0 the last layer's output of the block's last
        ``outputs`` tokens only (outputs, B, C): the others' keys and values are cached all the same.

        Inside the block, token j sees token b <= j (causal) or, given ``block_visible``
        ((m, m) bool), where ``block_visible[j, b]`` unless ``block_padding[i, b]`` ((B, m) bool
        or None, slots of row i that nobody sees); every token sees its row's whole cache."""
        m = x.size(0)
        length = high + m
        for layer in self.layers:
            layer.ensure_capacity(length)
        write = self._uniform_write(low, m) if low == high else self._ragged_write(valid, m)
        if block_visible is not None and low == high and block_padding is None:
            visible = F.pad(block_visible, (low, 0), value=True)  # (m, length): every row sees its whole cache
        elif block_visible is not None:
            visible = self._block_visible(valid, length, m, block_visible, block_padding)
        elif low == high:
            visible = self._uniform_visible(low, m, x.device)
        else:
            visible = self._ragged_visible(valid, length, m)
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            first_out = m - outputs if outputs and i == last else 0
            x = layer.forward(x, write, length, visible, self.encoder_visible, first_out)
        return x

    @staticmethod
    def _uniform_write(start: int, m: int):
        def write(buffer: Tensor, new: Tensor):
            buffer[:, :, start:start + m] = new
        return write

    @staticmethod
    def _uniform_visible(start: int, m: int, device) -> Optional[Tensor]:
        """(m, start + m) bool, False above the block's diagonal; None for one token."""
        if m == 1:
            return None
        slots = torch.arange(start + m, device=device)
        return slots.unsqueeze(0) <= (start + torch.arange(m, device=device)).unsqueeze(1)

    @staticmethod
    def _ragged_write(valid: Tensor, m: int):
        slots = valid.unsqueeze(1) + torch.arange(m, device=valid.device)  # (B, m)

        def write(buffer: Tensor, new: Tensor):
            index = slots[:, None, :, None].expand(-1, new.size(1), -1, new.size(3))
            buffer.scatter_(2, index, new)
        return write

    @staticmethod
    def _ragged_visible(valid: Tensor, length: int, m: int) -> Tensor:
        """(B, 1, m, length) bool: token j of row i sees slots <= valid[i] + j."""
        last_seen = valid.unsqueeze(1) + torch.arange(m, device=valid.device)  # (B, m)
        slots = torch.arange(length, device=valid.device)
        return (slots <= last_seen.unsqueeze(2)).unsqueeze(1)

    @staticmethod
    def _block_visible(valid: Tensor, length: int, m: int, visible: Tensor, padding: Optional[Tensor]) -> Tensor:
        """(B, 1, m, length) bool, True = seen: row i's slots before valid[i] (its cache), and
        its slot s holding block token s - valid[i] (in [0, m)) where ``visible`` allows it and
        it is not padding; slots past the block are not seen."""
        offset = torch.arange(length, device=valid.device).unsqueeze(0) - valid.unsqueeze(1)  # (B, L)
        in_block = (offset >= 0) & (offset < m)
        index = offset.clamp(0, m - 1)
        seen = visible[:, index].transpose(0, 1)  # (B, m, L)
        if padding is not None:
            seen = seen & ~padding.gather(1, index).unsqueeze(1)
        seen = (seen & in_block.unsqueeze(1)) | (offset < 0).unsqueeze(1)
        return seen.unsqueeze(1)

    def keep_rows(self, rows: Tensor):
        for layer in self.layers:
            layer.keep_rows(rows)
        if self.encoder_visible is not None:
            self.encoder_visible = self.encoder_visible.index_select(0, rows)
