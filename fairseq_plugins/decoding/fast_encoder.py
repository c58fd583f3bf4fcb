"""A lean inference forward of fairseq's transformer encoder, its ``nn.Linear`` products run
by a given function (``linears.PackedLinears``: float32 weights packed once).

fairseq's encoder multiplies every source token through ``F.linear``, which re-arranges each
weight on every call; the verifier's encoder then costs more than half a greedy step per
sentence on a CPU.  This is fairseq 0.12.2's ``TransformerEncoderBase.forward`` at inference
(dropout is the identity) with standard ``TransformerEncoderLayerBase`` layers: fairseq's own
``forward_embedding`` and padding, then per layer q/k/v projections, the attention
softmax(q k^T * head_dim ** -0.5) v with the source padding masked (one
``scaled_dot_product_attention`` call, as in ``fast_decoder``), the output projection,
residual + layer norm, the feed-forward block, residual + layer norm (pre- or post-norm as
configured); the final layer norm.  The same float32 arithmetic in another
order: results equal fairseq's to rounding (tests/test_fast_encoder.py).
"""
from typing import Dict, List, Optional

import torch
from fairseq.models.transformer import TransformerEncoderBase
from fairseq.modules import LayerDropModuleList
from fairseq.modules.transformer_layer import TransformerEncoderLayerBase
from torch import Tensor, nn

from fairseq_plugins.decoding.built_once import BuiltOnce
from fairseq_plugins.decoding.layer_parts import attend, attention_problems, plain_norm, split_heads
from fairseq_plugins.decoding.linears import Linear, float_linear


def fast_encoder_problems(encoder) -> List[str]:
    """Why :class:`FastEncoder` cannot run ``encoder`` (empty list: it can)."""
    if not isinstance(encoder, TransformerEncoderBase) or type(encoder).forward is not TransformerEncoderBase.forward \
            or type(encoder).forward_scriptable is not TransformerEncoderBase.forward_scriptable:
        return [f"encoder type {type(encoder).__name__}"]
    if encoder.training:
        return ["training mode"]
    if isinstance(encoder.layers, LayerDropModuleList):
        return ["layerdrop"]
    problems = []
    for layer in encoder.layers:
        problems += [p for p in _layer_problems(layer) if p not in problems]
    return problems


def _layer_problems(layer) -> List[str]:
    if type(layer).forward is not TransformerEncoderLayerBase.forward:
        return [f"encoder layer type {type(layer).__name__}"]
    problems = []
    if layer.return_fc or layer.quant_noise or type(layer.fc1) is not nn.Linear or type(layer.fc2) is not nn.Linear:
        problems.append("quant noise or returned fc results")
    if layer.dropout_module.apply_during_inference or layer.activation_dropout_module.apply_during_inference:
        problems.append("inference dropout")
    return problems + attention_problems(layer.self_attn, "encoder self-attention")


class FastEncoderLayer:
    """One ``TransformerEncoderLayer``'s weights as plain functions."""

    def __init__(self, layer, linear):
        sa = layer.self_attn
        self.heads, self.head_dim, self.scaling = sa.num_heads, sa.head_dim, sa.scaling
        self.q, self.k, self.v, self.out = linear(sa.q_proj), linear(sa.k_proj), linear(sa.v_proj), linear(sa.out_proj)
        self.fc1, self.fc2, self.activation = linear(layer.fc1), linear(layer.fc2), layer.activation_fn
        self.self_norm, self.final_norm = plain_norm(layer.self_attn_layer_norm), plain_norm(layer.final_layer_norm)
        self.normalize_before = layer.normalize_before

    def forward(self, x: Tensor, visible: Optional[Tensor]) -> Tensor:
        """x (S, B, C); visible (B, 1, 1, S) bool (False = a pad) or None -> (S, B, C)."""
        pre = self.normalize_before
        residual = x
        h = self.self_norm(x) if pre else x
        q, keys, values = (split_heads(project(h), self.heads, self.head_dim) for project in (self.q, self.k, self.v))
        x = residual + self.out(attend(q, keys, values, visible, self.scaling))
        if not pre:
            x = self.self_norm(x)
        residual = x
        h = self.final_norm(x) if pre else x
        x = residual + self.fc2(self.activation(self.fc1(h)))
        return x if pre else self.final_norm(x)


class FastEncoder:
    """``encoder(src_tokens, src_lengths)`` with the layers above; the same output dict as
    fairseq's encoder (``encoder_states``/``fc_results`` empty, as fairseq's by default)."""

    def __init__(self, encoder, linear: Linear):
        self.encoder = encoder
        self.layers = [FastEncoderLayer(layer, linear) for layer in encoder.layers]

    def __call__(self, src_tokens: Tensor, src_lengths: Optional[Tensor] = None) -> Dict[str, List[Tensor]]:
        encoder = self.encoder
        padding = src_tokens.eq(encoder.padding_idx)  # (B, S)
        has_pads = bool(padding.any())
        x, embedding = encoder.forward_embedding(src_tokens)
        if has_pads:
            x = x * (1 - padding.unsqueeze(-1).type_as(x))
        x = x.transpose(0, 1)
        visible = ~padding[:, None, None, :] if has_pads else None
        for layer in self.layers:
            x = layer.forward(x, visible)
        if encoder.layer_norm is not None:
            x = encoder.layer_norm(x)
        lengths = src_tokens.ne(encoder.padding_idx).sum(dim=1, dtype=torch.int32).reshape(-1, 1).contiguous()
        return {"encoder_out": [x], "encoder_padding_mask": [padding], "encoder_embedding": [embedding],
                "encoder_states": [], "fc_results": [], "src_tokens": [], "src_lengths": [lengths]}


def encoder_function(encoder, linear: Linear, built: Optional[BuiltOnce] = None):
    """How to encode with ``linear``'s products: a :class:`FastEncoder` when ``linear`` is not
    plain ``F.linear`` and the encoder is a standard one, else fairseq's own encoder; reused
    from ``built`` while the encoder is unchanged."""
    if linear is float_linear:
        return encoder

    def build():
        return encoder if fast_encoder_problems(encoder) else FastEncoder(encoder, linear)
    return build() if built is None else built.get("encoder", encoder, linear, build)
