"""Turning fairseq's generation options into a ``SpeculativeConfig``, with clear errors
for the options a parallel decoder cannot honour."""
import torch

from fairseq_plugins.decoding.core import SpeculativeConfig
from fairseq_plugins_compat.errors import PluginError

# generation option -> (its neutral value, why it cannot be combined)
UNSUPPORTED = {
    "sampling": (False, "sampling"),
    "nbest": (1, "--nbest > 1"),
    "prefix_size": (0, "--prefix-size"),
    "constraints": (None, "--constraints"),
    "no_repeat_ngram_size": (0, "--no-repeat-ngram-size"),
    "match_source_len": (False, "--match-source-len"),
    "lm_path": (None, "--lm-path"),
    "temperature": (1.0, "--temperature != 1"),
    "diverse_beam_groups": (-1, "--diverse-beam-groups"),
    "diversity_rate": (-1.0, "--diversity-rate"),
}


def check_generation_args(args, decoding):
    """Raise one PluginError listing every generation option ``decoding`` cannot honour."""
    bad = [why for name, (neutral, why) in UNSUPPORTED.items() if getattr(args, name, None) not in (neutral, None)]
    if bad:
        raise PluginError(f"--decoding {decoding} does not support: {', '.join(bad)} (use --decoding beam)")


def check_models_device(models):
    for model in models:
        param = next(model.parameters())
        if param.dtype == torch.float16 and param.device.type == "cpu":
            raise PluginError("fp16 decoding needs a CUDA device: drop --fp16, or run on a GPU")


def speculative_config(args, block_size, beta=1, tau=0.0, **extra) -> SpeculativeConfig:
    """A config from fairseq's generation options (``args``: cfg.generation)."""
    if block_size is None or block_size < 1:
        raise PluginError(f"--block-size must be >= 1, got {block_size}")
    if beta < 1:
        raise PluginError(f"--beta must be >= 1, got {beta}")
    if tau < 0:
        raise PluginError(f"--tau must be >= 0, got {tau}")
    return SpeculativeConfig(
        block_size=block_size, beta=beta, tau=tau,
        max_len_a=getattr(args, "max_len_a", 0.0), max_len_b=getattr(args, "max_len_b", 200),
        min_len=getattr(args, "min_len", 1), unk_penalty=getattr(args, "unkpen", 0.0),
        len_penalty=getattr(args, "lenpen", 1.0), normalize_scores=not getattr(args, "unnormalized", False),
        extra=extra,
    )


def report_as_greedy(args):
    """fairseq-generate names ``cfg.generation.beam`` in its BLEU line ("beam=5" by
    default); the plugin's decoders keep one hypothesis, so say beam=1 there."""
    try:
        args.beam = 1
    except Exception:  # a read-only config: the BLEU line keeps its beam value
        pass
