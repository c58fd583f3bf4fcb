"""Decoder of the block NAT drafter: prefix + k queries in, k distributions out.

It reuses fairseq's transformer decoder layers, embeddings, positions and output
projection unchanged; only the input (see :mod:`drafter_blocks`) and the self-attention
mask differ.  The mask symbol of the queries is the dictionary's ``unk`` (fairseq's NAT
convention): the drafter's dictionary stays identical to the verifier's.
"""
from typing import Dict, List, Optional

import torch
import torch.nn as nn
from torch import Tensor

from fairseq.models.transformer import TransformerDecoderBase
from fairseq_plugins.models import drafter_blocks
from fairseq_plugins.models.sequential_head import SequentialHead
from fairseq_plugins_compat.errors import PluginError


def count_queries(decoder, longest: int, k: int) -> int:
    """Queries to run to draft k tokens after prefixes of at most ``longest`` tokens: ``decoder.block_size``, fewer
    near the end of the position table, never fewer than k (else a one-line PluginError)."""
    if not 1 <= k <= decoder.block_size:
        raise PluginError(f"the drafter was trained with block size {decoder.block_size}; cannot propose {k} tokens")
    n_queries = min(decoder.block_size, decoder.max_positions() - longest)
    if n_queries < k:
        raise PluginError(f"a prefix of {longest} tokens + {k} drafted tokens exceeds "
                          f"the drafter's {decoder.max_positions()} target positions")
    return n_queries


class BlockDrafterDecoder(TransformerDecoderBase):
    """Transformer decoder reading a prefix and ``block_size`` mask queries.

    Args:
        cfg (TransformerConfig): the usual fairseq transformer config
        block_size (int): k, the number of queries it is trained with
        prefix_causal (bool): prefix tokens attend causally (True) or bidirectionally
            among themselves; they never attend to the queries
        soft_copy (bool): query inputs are a soft copy of the source embeddings
        soft_copy_temperature (float): initial (learned) temperature of the soft copy
        sequential_head (bool): add a :class:`SequentialHead` (the identity until trained)
    """

    def __init__(self, cfg, dictionary, embed_tokens, block_size=25, prefix_causal=True,
                 soft_copy=False, soft_copy_temperature=1.0, sequential_head=False):
        super().__init__(cfg, dictionary, embed_tokens, no_encoder_attn=False)
        self.block_size = int(block_size)
        self.prefix_causal = bool(prefix_causal)
        self.soft_copy = bool(soft_copy)
        self.mask_idx = dictionary.unk()
        self.banned = sorted({dictionary.pad(), dictionary.bos(), self.mask_idx})
        if self.soft_copy:
            self.copy_temperature = nn.Parameter(torch.tensor(float(soft_copy_temperature)))
        self.sequential_head = SequentialHead(self.output_embed_dim, embed_tokens.embedding_dim) \
            if sequential_head else None

    def mask_queries(self, batch_size: int, k: int, device) -> Tensor:
        """(B, k) queries that are all the mask symbol."""
        return torch.full((batch_size, k), self.mask_idx, dtype=torch.long, device=device)

    def embed_block(self, tokens: Tensor, prefix_lengths: Tensor, query_start: int,
                    encoder_out: Dict[str, List[Tensor]]) -> Tensor:
        """tokens (B, P+k) from ``drafter_blocks.block_input`` -> embeddings (B, P+k, C).

        Mask queries get the soft copy of the source (if enabled); prefix tokens and
        glanced queries get their token embedding.  Positions count real tokens only.
        """
        x = self.embed_scale * self.embed_tokens(tokens)
        if self.soft_copy:
            queries = tokens[:, query_start:]
            k = queries.size(1)
            target_positions = (prefix_lengths - 1)[:, None] + torch.arange(k, device=tokens.device)[None, :]
            copied = drafter_blocks.soft_copy(
                encoder_out["encoder_embedding"][0], encoder_out["encoder_padding_mask"][0],
                target_positions, self.copy_temperature,
            )
            is_mask = queries.eq(self.mask_idx).unsqueeze(-1)
            x = torch.cat([x[:, :query_start], torch.where(is_mask, copied.to(x), x[:, query_start:])], dim=1)
        return self.finish_embedding(x, None if self.embed_positions is None else self.embed_positions(tokens))

    def finish_embedding(self, x: Tensor, positions: Optional[Tensor]) -> Tensor:
        """Token (or soft-copy) embeddings x (B, m, C) -> the decoder's input: input projection,
        + position embeddings (B, m, C) (None: none), embedding layer norm, dropout."""
        if self.project_in_dim is not None:
            x = self.project_in_dim(x)
        if positions is not None:
            x = x + positions
        if self.layernorm_embedding is not None:
            x = self.layernorm_embedding(x)
        return self.dropout_module(x)

    def forward_block(self, encoder_out: Dict[str, List[Tensor]], prefix_tokens: Tensor,
                      prefix_lengths: Tensor, query_tokens: Optional[Tensor] = None,
                      features_only: bool = False) -> Tensor:
        """Logits (B, k, V) at the k query positions (``features_only``: their states (B, k, C) before the output
        layer).

        prefix_tokens (B, P) right-padded, column 0 = eos; prefix_lengths (B,) real tokens
        including that eos; query_tokens (B, k): the mask symbol, or a gold token where
        glancing reveals it (default: ``block_size`` masks).
        """
        bsz, prefix_len = prefix_tokens.shape
        if query_tokens is None:
            query_tokens = self.mask_queries(bsz, self.block_size, prefix_tokens.device)
        k = query_tokens.size(1)
        tokens, key_padding = drafter_blocks.block_input(prefix_tokens, prefix_lengths, query_tokens, self.padding_idx)
        x = self.embed_block(tokens, prefix_lengths, prefix_len, encoder_out).transpose(0, 1)
        allowed = drafter_blocks.block_attention_mask(prefix_len, k, self.prefix_causal, device=x.device)
        self_attn_mask = ~allowed  # bool like the key padding mask: True = may not attend
        enc = encoder_out["encoder_out"][0] if encoder_out["encoder_out"] else None
        enc_mask = encoder_out["encoder_padding_mask"][0] if encoder_out["encoder_padding_mask"] else None
        for layer in self.layers:
            x, _, _ = layer(x, enc, enc_mask, None, self_attn_mask=self_attn_mask,
                            self_attn_padding_mask=key_padding)
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        x = x.transpose(0, 1)[:, prefix_len:]
        if self.project_out_dim is not None:
            x = self.project_out_dim(x)
        return x if features_only else self.output_layer(x)

    def forward(self, prev_output_tokens, encoder_out=None, prefix_lengths=None, query_tokens=None, **unused):
        """fairseq-style entry point: ``prev_output_tokens`` is the prefix (B, P)."""
        if prefix_lengths is None:
            prefix_lengths = prev_output_tokens.ne(self.padding_idx).sum(1)
        return self.forward_block(encoder_out, prev_output_tokens, prefix_lengths, query_tokens), {}

    def propose_states(self, encoder_out, prefix_tokens: Tensor, prefix_lengths: Tensor, k: int) -> Tensor:
        """States (B, k, C) of the first k of ``block_size`` queries, before the output layer.

        Near the end of the position table fewer queries are run (:func:`count_queries`).
        """
        n_queries = count_queries(self, int(prefix_lengths.max()), k)
        queries = self.mask_queries(prefix_tokens.size(0), n_queries, prefix_tokens.device)
        return self.forward_block(encoder_out, prefix_tokens, prefix_lengths, queries, features_only=True)[:, :k]

    def propose_logits(self, states: Tensor) -> Tensor:
        """Query states (B, k, C) -> logits (B, k, V) float32; pad, bos and the mask symbol get -inf."""
        logits = self.output_layer(states).float()
        logits[..., self.banned] = float("-inf")
        return logits

    def propose_log_probs(self, encoder_out, prefix_tokens: Tensor, prefix_lengths: Tensor, k: int) -> Tensor:
        """Log-probs (B, k, V) of the first k of ``block_size`` queries (``propose_states``); pad, bos and the mask
        symbol get -inf (the distribution is renormalised over the other tokens)."""
        states = self.propose_states(encoder_out, prefix_tokens, prefix_lengths, k)
        return torch.log_softmax(self.propose_logits(states), dim=-1)
