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


def _set_defaults(args, **defaults):
    for name, value in defaults.items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)


@register_model_architecture("transformer", "specdec_verifier_base")
def specdec_verifier_base(args):
    """Transformer-base, shared source/target/output embeddings (joined dictionary)."""
    _set_defaults(args, share_all_embeddings=True, max_source_positions=1000, max_target_positions=1000)
    base_architecture(args)


@register_model_architecture("transformer", "specdec_verifier_big")
def specdec_verifier_big(args):
    """Transformer-big (Vaswani et al.), dropout 0.3."""
    _set_defaults(args, encoder_embed_dim=1024, encoder_ffn_embed_dim=4096, encoder_attention_heads=16,
                  decoder_embed_dim=1024, decoder_ffn_embed_dim=4096, decoder_attention_heads=16, dropout=0.3)
    specdec_verifier_base(args)


@register_model_architecture("transformer", "specdec_verifier_12_2")
def specdec_verifier_12_2(args):
    """Deep encoder, shallow decoder (Kasai et al. 2021), base sizes."""
    _set_defaults(args, encoder_layers=12, decoder_layers=2)
    specdec_verifier_base(args)


@register_model_architecture("transformer", "specdec_verifier_tiny")
def specdec_verifier_tiny(args):
    """2+2 layers, 32/64/2, 256 positions: for tests and CPU smoke runs."""
    _set_defaults(args, encoder_layers=2, decoder_layers=2, encoder_embed_dim=32, decoder_embed_dim=32,
                  encoder_ffn_embed_dim=64, decoder_ffn_embed_dim=64, encoder_attention_heads=2,
                  decoder_attention_heads=2, max_source_positions=256, max_target_positions=256)
    specdec_verifier_base(args)
