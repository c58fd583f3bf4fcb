"""What the lean encoder (``fast_encoder``) and decoder (``fast_decoder``) layers share: the check that an
attention is fairseq's standard ``MultiheadAttention``, the layer norm as a plain function, and the attention
over split heads in one ``scaled_dot_product_attention`` call."""
from typing import Callable, List, Optional

import torch
import torch.nn.functional as F
from fairseq.modules import MultiheadAttention
from torch import Tensor, nn


def attention_problems(attn, name: str) -> List[str]:
    if type(attn) is not MultiheadAttention:
        return [f"{name} of type {type(attn).__name__}"]
    problems = []
    if attn.bias_k is not None or attn.add_zero_attn:
        problems.append(f"{name} with bias_kv/zero_attn")
    if attn.skip_embed_dim_check or attn.onnx_trace or attn.dropout_module.apply_during_inference:
        problems.append(f"{name} with pruned heads, onnx tracing or inference dropout")
    if any(type(proj) is not nn.Linear for proj in (attn.q_proj, attn.k_proj, attn.v_proj, attn.out_proj)):
        problems.append(f"{name} with quantised projections")
    return problems


def plain_norm(module) -> Callable[[Tensor], Tensor]:
    """The layer norm as a plain function (a module call costs more than the kernel)."""
    if type(module) is not nn.LayerNorm:
        return module
    shape, weight, bias, eps = module.normalized_shape, module.weight, module.bias, module.eps
    return lambda x: torch.layer_norm(x, shape, weight, bias, eps, True)  # what F.layer_norm calls


def split_heads(x: Tensor, heads: int, head_dim: int) -> Tensor:
    """(T, B, heads * head_dim) -> (B, heads, T, head_dim) (a view)."""
    return x.view(x.size(0), x.size(1), heads, head_dim).permute(1, 2, 0, 3)


def attend(q: Tensor, k: Tensor, v: Tensor, visible: Optional[Tensor], scaling: float) -> Tensor:
    """Queries q (B, H, m, d), keys/values (B, H, L, d), bool mask broadcastable to
    (B, H, m, L) (True = may attend) or None -> (m, B, H*d): softmax(q k^T * scaling) v,
    in one ``scaled_dot_product_attention`` call (fairseq's bmm / -inf / softmax / bmm, one
    operation instead of about ten; equal to rounding)."""
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=visible, scale=scaling)
    return out.permute(2, 0, 1, 3).reshape(q.size(2), q.size(0), -1)
