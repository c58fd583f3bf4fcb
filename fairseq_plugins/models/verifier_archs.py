"""AT verifier presets: named ``--arch`` settings of fairseq's own ``transformer`` model
(SpecDec section 3.2 and appendix A/B.5), usable with stock ``fairseq-train``.

=========================  ==============================================  =====================
arch                       sizes                                           paper use
=========================  ==============================================  =====================
specdec_verifier_base      6+6 layers, 512/2048/8, shared embeddings        main results
specdec_verifier_big       6+6 layers, 1024/4096/16, dropout 0.3            SpecDec-big
specdec_verifier_12_2      12 encoder + 2 decoder layers, 512/2048/8        deep-shallow (B.5)
specdec_verifier_tiny      2+2 layers, 32/64/2                              tests, CPU smoke runs
=========================  ==============================================  =====================

All keep fairseq's transformer defaults otherwise (sinusoidal positions, post-norm, ReLU,
scaled embeddings); a drafter initialised from such a verifier adopts them for its
encoder (see :mod:`fairseq_plugins.models.drafter_init`).  Max positions default to the
paper's 1000 so that the drafter and verifier presets agree.
"""
from fairseq.models import register_model_architecture
from fairseq.models.transformer import base_architecture

from fairseq_plugins.models.arch_defaults import BIG_SIZES, TINY_SIZES, set_defaults, set_size_defaults


@register_model_architecture("transformer", "specdec_verifier_base")
def specdec_verifier_base(args):
    """Transformer-base, shared source/target/output embeddings (joined dictionary)."""
    set_defaults(args, share_all_embeddings=True, max_source_positions=1000, max_target_positions=1000)
    base_architecture(args)


@register_model_architecture("transformer", "specdec_verifier_big")
def specdec_verifier_big(args):
    """Transformer-big (Vaswani et al.), dropout 0.3."""
    set_size_defaults(args, **BIG_SIZES)
    set_defaults(args, dropout=0.3)
    specdec_verifier_base(args)


@register_model_architecture("transformer", "specdec_verifier_12_2")
def specdec_verifier_12_2(args):
    """Deep encoder, shallow decoder (Kasai et al. 2021), base sizes."""
    set_defaults(args, encoder_layers=12, decoder_layers=2)
    specdec_verifier_base(args)


@register_model_architecture("transformer", "specdec_verifier_tiny")
def specdec_verifier_tiny(args):
    """2+2 layers, 32/64/2, 256 positions: for tests and CPU smoke runs."""
    set_size_defaults(args, **TINY_SIZES)
    set_defaults(args, max_source_positions=256, max_target_positions=256)
    specdec_verifier_base(args)
