"""``--arch block_drafter*``: the block NAT drafter of SpecDec/GAD (SpecDec section 3.1).

Given the source x and a target prefix y_<=p it predicts y_{p+1} .. y_{p+k} in parallel
(see :mod:`fairseq_plugins.models.drafter_blocks` for the input layout and attention
mask).  Train it with ``--criterion glancing_block_loss``.  Inference API used by the
decoding core::

    encoder_out = model.encoder(src_tokens, src_lengths)          # standard fairseq dict
    draft = model.propose(encoder_out, prefix_tokens, prefix_lengths, k)    # (B, k) long
    lprobs = model.propose_logits(encoder_out, prefix_tokens, prefix_lengths, k)  # (B, k, V)
    model.block_size, model.max_positions()
"""
import logging
from dataclasses import dataclass, field, fields
from typing import Optional

import torch
from torch import Tensor

from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.dataclass.utils import gen_parser_from_dataclass
from fairseq.models import FairseqEncoderDecoderModel, register_model, register_model_architecture
from fairseq.models.transformer import TransformerConfig
from fairseq.models.transformer import base_architecture as transformer_base_architecture
from fairseq.models.transformer.transformer_base import Embedding
from fairseq.modules.transformer_sentence_encoder import init_bert_params

from fairseq_plugins.models import drafter_blocks, drafter_init
from fairseq_plugins.models.arch_defaults import BIG_SIZES, TINY_SIZES, set_defaults, set_size_defaults
from fairseq_plugins.models.block_drafter_decoder import BlockDrafterDecoder
from fairseq_plugins_compat.errors import PluginError

logger = logging.getLogger(__name__)


@dataclass
class BlockDrafterConfig(FairseqDataclass):
    """Drafter options on top of fairseq's transformer options (``--encoder-layers`` ...)."""

    block_size: int = field(default=25, metadata={"help": "k: tokens drafted in parallel (paper: 25 base, 30 big)"})
    prefix_attention: ChoiceEnum(["causal", "bidirectional"]) = field(
        default="causal",
        metadata={"help": "how prefix tokens attend to each other (they never see the queries; "
                          "'causal' keeps prefix states those of a left-to-right decoder)"},
    )
    soft_copy: bool = field(default=False, metadata={"help": "queries start from a soft copy of the source embeddings"})
    soft_copy_temperature: float = field(default=1.0, metadata={"help": "initial temperature of the (learned) soft copy"})
    apply_bert_init: bool = field(default=False, metadata={"help": "BERT-style N(0, 0.02) initialisation"})
    init_from_verifier: Optional[str] = field(
        default=None,
        metadata={"help": "verifier checkpoint: the drafter takes its encoder architecture and copies its "
                          "encoder and embeddings (the initialised encoder computes what the verifier's does)"},
    )
    init_decoder_from_verifier: ChoiceEnum(["first", "last", "none"]) = field(
        default="first",
        metadata={"help": "with --init-from-verifier: copy the verifier's first (or last) n decoder layers, "
                          "final layer norm and learned positions where shapes match (the drafter adopts "
                          "the verifier's decoder layout); none: a fresh decoder"},
    )
    share_verifier_encoder: bool = field(
        default=False,
        metadata={"help": "with --init-from-verifier: the encoder is the verifier's, frozen (no gradient, "
                          "no dropout), so decoding can reuse the verifier's encoder output; the decoder's "
                          "embeddings are then untied from the encoder's"},
    )
    sequential_head: bool = field(
        default=False,
        metadata={"help": "a sequential head drafts the block's tokens one after another from the block's states "
                          "(models/sequential_head.py); it starts as the identity and is trained on a trained "
                          "drafter by fairseq_plugins.scripts.train_sequential_head, which sets this"},
    )


@register_model("block_drafter")
class BlockDrafterModel(FairseqEncoderDecoderModel):
    """Standard fairseq transformer encoder + :class:`BlockDrafterDecoder`."""

    def __init__(self, args, encoder, decoder):
        super().__init__(encoder, decoder)
        self.args = args
        self.num_updates = 0

    @classmethod
    def add_args(cls, parser):
        gen_parser_from_dataclass(parser, TransformerConfig(), delete_default=True, with_prefix="")
        gen_parser_from_dataclass(parser, BlockDrafterConfig(), delete_default=True)

    @classmethod
    def build_model(cls, args, task):
        base_drafter_architecture(args)
        if args.block_size < 1:
            raise PluginError(f"--block-size must be >= 1, got {args.block_size}")
        verifier_state = drafter_init.adopt_verifier_encoder(args)  # None unless initialising now
        src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
        cfg = TransformerConfig.from_namespace(args)
        encoder_embed = Embedding(len(src_dict), cfg.encoder.embed_dim, src_dict.pad())
        if args.share_all_embeddings:
            if src_dict != tgt_dict:
                raise PluginError("--share-all-embeddings requires a joined dictionary")
            decoder_embed = encoder_embed
        else:
            decoder_embed = Embedding(len(tgt_dict), cfg.decoder.embed_dim, tgt_dict.pad())
        if args.soft_copy and cfg.encoder.embed_dim != cfg.decoder.input_dim:
            raise PluginError("--soft-copy needs --encoder-embed-dim == --decoder-input-dim")
        encoder = drafter_init.encoder_class(args)(cfg, src_dict, encoder_embed)
        decoder = BlockDrafterDecoder(
            cfg, tgt_dict, decoder_embed, block_size=args.block_size,
            prefix_causal=args.prefix_attention == "causal", soft_copy=args.soft_copy,
            soft_copy_temperature=args.soft_copy_temperature, sequential_head=args.sequential_head,
        )
        model = cls(args, encoder, decoder)
        if args.apply_bert_init:
            model.apply(init_bert_params)
        if verifier_state is not None:
            drafter_init.copy_verifier_weights(model, verifier_state, args)
        if args.share_verifier_encoder:
            drafter_init.freeze(model.encoder)
        return model

    @property
    def block_size(self) -> int:
        """k, the number of tokens the drafter was trained to propose."""
        return self.decoder.block_size

    @property
    def mask_idx(self) -> int:
        return self.decoder.mask_idx

    def set_num_updates(self, num_updates):
        """Called by fairseq every update; the glancing criterion reads ``num_updates``."""
        super().set_num_updates(num_updates)
        self.num_updates = num_updates

    def forward(self, src_tokens, src_lengths, prev_output_tokens, prefix_lengths=None, gold=None,
                glance_ratio: float = 0.0, generator=None, **unused):
        """Training/validation pass over one block per row (glancing when ``glance_ratio`` > 0).

        prev_output_tokens (B, P): the prefix, right-padded, column 0 = eos;
        prefix_lengths (B,); gold (B, k): the block's gold tokens (pad past the target).
        Returns logits (B, k, V) and ``{"first_pass": (B, k) argmax of the mask-only pass,
        "reveal": (B, k) bool, the glanced positions, or None}``.  Glancing (GLAT) runs
        inside one forward call so that DDP sees a single forward per update.
        """
        encoder_out = self.encoder(src_tokens, src_lengths=src_lengths)
        if prefix_lengths is None:
            prefix_lengths = prev_output_tokens.ne(self.decoder.padding_idx).sum(1)
        if gold is None or glance_ratio <= 0:
            logits = self.decoder.forward_block(encoder_out, prev_output_tokens, prefix_lengths)
            return logits, {"first_pass": logits.detach().argmax(-1), "reveal": None}
        with torch.no_grad():
            first_pass = self.decoder.forward_block(encoder_out, prev_output_tokens, prefix_lengths).argmax(-1)
        reveal, _, _ = drafter_blocks.glance_reveal_mask(
            first_pass, gold, self.decoder.padding_idx, glance_ratio, generator)
        queries = torch.where(reveal, gold, torch.full_like(gold, self.mask_idx))
        logits = self.decoder.forward_block(encoder_out, prev_output_tokens, prefix_lengths, queries)
        return logits, {"first_pass": first_pass, "reveal": reveal}

    @torch.no_grad()
    def propose_logits(self, encoder_out, prefix_tokens: Tensor, prefix_lengths: Tensor, k: Optional[int] = None) -> Tensor:
        """Log-probs (B, k, V) of the next k tokens (k <= block_size; the drafter always
        runs its trained ``block_size`` queries and returns the first k)."""
        return self.decoder.propose_log_probs(encoder_out, prefix_tokens, prefix_lengths, k or self.block_size)

    @torch.no_grad()
    def propose(self, encoder_out, prefix_tokens: Tensor, prefix_lengths: Tensor, k: Optional[int] = None) -> Tensor:
        """Argmax draft (B, k) of the next k tokens; never pad, bos or the mask symbol.

        prefix_tokens (B, P): right-padded with pad, column 0 = eos; prefix_lengths (B,):
        real tokens including that eos.
        """
        return self.propose_logits(encoder_out, prefix_tokens, prefix_lengths, k).argmax(-1)


@register_model_architecture("block_drafter", "block_drafter")
def base_drafter_architecture(args):
    """Transformer-base (6+6, 512/2048/8) with the paper's drafter options: learned
    positions, GELU, BERT init, shared embeddings, soft copy, k = 25."""
    set_defaults(args, encoder_learned_pos=True, decoder_learned_pos=True, activation_fn="gelu",
                  apply_bert_init=True, share_all_embeddings=True, soft_copy=True)
    for option in fields(BlockDrafterConfig):
        set_defaults(args, **{option.name: option.default})
    # the verifier presets take 1000 positions; the drafter can then draft a whole block
    # after any target prefix the verifier accepts
    set_defaults(args, max_source_positions=1000)
    set_defaults(args, max_target_positions=args.max_source_positions + args.block_size)
    transformer_base_architecture(args)
    if args.share_all_embeddings:
        args.share_decoder_input_output_embed = True


@register_model_architecture("block_drafter", "block_drafter_big")
def big_drafter_architecture(args):
    """Transformer-big sizes (1024/4096/16), k = 30 as in the paper's big setting."""
    set_size_defaults(args, **BIG_SIZES)
    set_defaults(args, dropout=0.3, block_size=30)
    base_drafter_architecture(args)


@register_model_architecture("block_drafter", "block_drafter_12_2")
def deep_shallow_drafter_architecture(args):
    """Deep encoder, shallow decoder (12-2), base sizes (paper appendix B.5)."""
    set_defaults(args, encoder_layers=12, decoder_layers=2)
    base_drafter_architecture(args)


@register_model_architecture("block_drafter", "block_drafter_tiny")
def tiny_drafter_architecture(args):
    """2+2 layers, 32/64/2, k = 4: for tests and CPU smoke runs."""
    set_size_defaults(args, **TINY_SIZES)
    set_defaults(args, block_size=4, max_source_positions=256)
    base_drafter_architecture(args)

