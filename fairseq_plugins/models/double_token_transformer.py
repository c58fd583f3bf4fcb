"""``--arch double_token_transformer*``: a transformer whose decoder emits ``k`` tokens per
step (``k = 2`` for the double-token orders of ``--task double_token_translation``).

Differences from fairseq's transformer (paper section 3):

- causal self-attention mask whose unit is a step of ``k`` tokens: both tokens of a pair see
  each other and every earlier pair, never a later one;
- learned decoder positions (sinusoids do not fit non-contiguous pairs), with one extra
  slot because the decoding order is at most one token longer than the natural order;
- incremental decoding feeds a whole step (one pair) at a time and keeps every layer's
  keys/values in fairseq's ``incremental_state`` (inner state preservation);
- ``get_targets()`` returns the batch's decoding-order target, so stock criterions train it.
"""
from typing import Dict, List, Optional

import torch
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import TransformerConfig, TransformerDecoderBase, TransformerModel
from fairseq.models.transformer.transformer_legacy import base_architecture
from fairseq.modules import PositionalEmbedding
from torch import Tensor

from fairseq_plugins.decoding.incremental import decoder_input
from fairseq_plugins.models.arch_defaults import SMALL_SIZES, TINY_SIZES, set_defaults, set_size_defaults
from fairseq_plugins.double_token.dataset import DECODING_TARGET
from fairseq_plugins.double_token.reorder import TOKENS_PER_STEP
from fairseq_plugins_compat.errors import PluginError


def step_mask(length, tokens_per_step, device=None, dtype=torch.float):
    """Additive self-attention mask ``(length, length)``: query ``i`` may see key ``j`` iff
    ``j // k <= i // k`` (0 where allowed, -inf elsewhere)."""
    unit = torch.arange(length, device=device) // tokens_per_step
    future = unit.unsqueeze(0) > unit.unsqueeze(1)
    return torch.zeros(length, length, device=device, dtype=dtype).masked_fill(future, float("-inf"))


class DoubleTokenTransformerDecoder(TransformerDecoderBase):
    """Transformer decoder with a step-unit causal mask and k-token incremental steps."""

    tokens_per_step = 2  # set by DoubleTokenTransformerModel.build_model from the task

    def __init__(self, cfg, dictionary, embed_tokens, no_encoder_attn=False, output_projection=None):
        super().__init__(cfg, dictionary, embed_tokens, no_encoder_attn, output_projection)
        self._mask_unit = None
        if self.embed_positions is not None:
            self.embed_positions = PositionalEmbedding(
                self.max_target_positions + 1, self.embed_dim, self.padding_idx, learned=True
            )

    def buffered_future_mask(self, tensor):
        """Step-unit causal mask for ``tensor`` of shape ``(T, B, C)``: ``(T, T)``."""
        dim, k = tensor.size(0), self.tokens_per_step
        cached = self._future_mask
        if cached.size(0) < dim or cached.device != tensor.device or self._mask_unit != k:
            self._future_mask = step_mask(dim, k, device=tensor.device)
            self._mask_unit = k
        return self._future_mask[:dim, :dim].to(tensor)

    def _cached_length(self, incremental_state, new_length):
        """Tokens already in the cache; records ``new_length`` as the cached length."""
        saved = self.get_incremental_state(incremental_state, "cached")
        cached = int(saved["length"].item()) if saved is not None else 0
        self.set_incremental_state(incremental_state, "cached", {"length": torch.tensor(new_length)})
        return cached

    def extract_features_scriptable(
        self,
        prev_output_tokens,
        encoder_out: Optional[Dict[str, List[Tensor]]],
        incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None,
        full_context_alignment: bool = False,
        alignment_layer: Optional[int] = None,
        alignment_heads: Optional[int] = None,
    ):
        """prev_output_tokens ``(B, T)``, the whole prefix also when incremental.

        Returns features ``(B, T_new, C)`` (``T_new`` = tokens not yet cached, e.g. one pair)
        and ``{"attn": [attn or None], "inner_states": [...]}``.
        """
        length = prev_output_tokens.size(1)
        positions = self.embed_positions(prev_output_tokens) if self.embed_positions is not None else None
        cached = 0
        if incremental_state is not None:
            cached = self._cached_length(incremental_state, length)
            prev_output_tokens = prev_output_tokens[:, cached:]
            positions = positions[:, cached:] if positions is not None else None
        x = decoder_input(self, prev_output_tokens.contiguous(), positions)
        self_attn_mask = None
        if incremental_state is not None:  # new tokens (one step) against the whole prefix
            self_attn_mask = step_mask(length, self.tokens_per_step, x.device, x.dtype)[cached:]
        elif not full_context_alignment:
            self_attn_mask = self.buffered_future_mask(x)
        return self._run_layers(x, prev_output_tokens, encoder_out, incremental_state, self_attn_mask,
                                alignment_layer, alignment_heads)

    def _run_layers(self, x, tokens, encoder_out, incremental_state, self_attn_mask, alignment_layer, alignment_heads):
        """x ``(T, B, C)`` through the layers -> ``(B, T, C_out)``, extras."""
        enc = encoder_out["encoder_out"][0] if encoder_out and len(encoder_out["encoder_out"]) > 0 else None
        enc_mask = None
        if encoder_out and len(encoder_out["encoder_padding_mask"]) > 0:
            enc_mask = encoder_out["encoder_padding_mask"][0]
        pad_mask = tokens.eq(self.padding_idx)
        pad_mask = pad_mask if (self.cross_self_attention or pad_mask.any()) else None
        alignment_layer = self.num_layers - 1 if alignment_layer is None else alignment_layer
        attn, inner_states = None, [x]
        for idx, layer in enumerate(self.layers):
            x, layer_attn, _ = layer(
                x, enc, enc_mask, incremental_state, self_attn_mask=self_attn_mask,
                self_attn_padding_mask=pad_mask, need_attn=idx == alignment_layer,
                need_head_weights=idx == alignment_layer,
            )
            inner_states.append(x)
            if layer_attn is not None and idx == alignment_layer:
                attn = layer_attn.float().to(x)
        if attn is not None:
            attn = (attn[:alignment_heads] if alignment_heads is not None else attn).mean(dim=0)
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        x = x.transpose(0, 1)
        if self.project_out_dim is not None:
            x = self.project_out_dim(x)
        return x, {"attn": [attn], "inner_states": inner_states}


def _check_model_args(args, task):
    """The task's target order; PluginError for a wrong task, order or position setting."""
    order = getattr(task, "target_order", None)
    if order is None:
        raise PluginError("--arch double_token_transformer* needs --task double_token_translation")
    trained = getattr(args, "target_order", None)
    if trained is not None and trained != order:
        raise PluginError(f"the model was trained with --target-order {trained}, not {order}; "
                          "pass the same --target-order")
    if getattr(args, "no_token_positional_embeddings", False) or not getattr(args, "decoder_learned_pos", True):
        raise PluginError("double-token decoding needs learned decoder positions (--decoder-learned-pos)")
    return order


@register_model("double_token_transformer")
class DoubleTokenTransformerModel(TransformerModel):
    """Transformer with a :class:`DoubleTokenTransformerDecoder` (``k`` tokens per step)."""

    @classmethod
    def build_model(cls, args, task):
        order = _check_model_args(args, task)
        model = super().build_model(args, task)
        model.target_order = order
        model.decoder.tokens_per_step = TOKENS_PER_STEP[order]
        return model

    @classmethod
    def build_decoder(cls, args, tgt_dict, embed_tokens):
        cfg = TransformerConfig.from_namespace(args)
        return DoubleTokenTransformerDecoder(cfg, tgt_dict, embed_tokens, no_encoder_attn=cfg.no_cross_attention)

    def get_targets(self, sample, net_output):
        """The decoding-order target ``(B, T)`` of a ``double_token_translation`` batch."""
        if DECODING_TARGET not in sample:
            raise PluginError("this batch has no decoding-order target; train with --task double_token_translation")
        return sample[DECODING_TARGET]


@register_model_architecture("double_token_transformer", "double_token_transformer")
def double_token_base_architecture(args):
    """Transformer base (6 layers, 512 dim) with learned decoder positions."""
    set_defaults(args, decoder_learned_pos=True)
    base_architecture(args)


@register_model_architecture("double_token_transformer", "double_token_transformer_small")
def double_token_small_architecture(args):
    """3 layers, 256 dim, 4 heads: Multi30k-size runs on a CPU."""
    set_size_defaults(args, **SMALL_SIZES)
    set_defaults(args, dropout=0.3)
    double_token_base_architecture(args)


@register_model_architecture("double_token_transformer", "double_token_transformer_tiny")
def double_token_tiny_architecture(args):
    """2 layers, 32 dim, 2 heads: unit tests."""
    set_size_defaults(args, **TINY_SIZES)
    double_token_base_architecture(args)
