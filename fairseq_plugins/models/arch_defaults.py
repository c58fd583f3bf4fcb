"""Defaults of the plugin's architecture presets (verifier, drafter, double-token): an
option already set (on the command line, or by a more specific preset) is kept."""

BIG_SIZES = dict(embed_dim=1024, ffn_embed_dim=4096, attention_heads=16)  # Transformer-big
SMALL_SIZES = dict(layers=3, embed_dim=256, ffn_embed_dim=1024, attention_heads=4)  # Multi30k on a CPU
TINY_SIZES = dict(layers=2, embed_dim=32, ffn_embed_dim=64, attention_heads=2)  # tests


def set_defaults(args, **defaults):
    """``args.name = value`` for every option not set yet (missing or None)."""
    for name, value in defaults.items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)


def set_size_defaults(args, **sizes):
    """Encoder and decoder ``{side}_{name}`` defaults: ``layers=3`` -> encoder_layers, decoder_layers."""
    set_defaults(args, **{f"{side}_{name}": value for side in ("encoder", "decoder") for name, value in sizes.items()})
