"""The decoders' options (dataclasses, shared through inheritance) and the checks that turn
fairseq's generation options into a ``SpeculativeConfig`` with clear one-line errors."""
from dataclasses import dataclass, field
from typing import Optional

import torch
from fairseq.dataclass import ChoiceEnum

from fairseq_plugins.decoding.core import SpeculativeConfig
from fairseq_plugins_compat.errors import PluginError

REST_OF_INPUT = 1024  # "k = the rest of the input" (IAD, PJ): a cap on k, longer than any output of a model
# with up to 1,024 target positions

DRAFT_LENGTH_HELP = (
    "how many tokens a row drafts per iteration: fixed: always --block-size; adaptive: twice the last draft after a "
    "fully accepted one, accepted + 1 after a rejection; measured (the default): adaptive for iad and the Jacobi "
    "family, fixed for a trained drafter, and drafting is skipped in the iterations where not drafting is measured "
    "more than 10%% faster (re-tried now and then), so a drafter that does not pay costs little. The output never "
    "depends on it (specdec++ always drafts). docs/decoding-options.md"
)

VERIFIER_MATMUL_HELP = (
    "the verifier's matrix products on a CPU (CUDA: plain): auto (the default): weights that are float16 numbers "
    "(a checkpoint exported with --fp16) stored as float16, float32 math (fbgemm; half the bytes a token reads), the "
    "others as packed; packed: weights packed once in oneDNN's float32 layout; plain: F.linear, as fairseq; int8: "
    "large weights in int8 per output channel times int8 inputs per token, int32 sums (x86; some outputs differ "
    "from float32's, as with CTranslate2's int8); bf16: bfloat16 weights and inputs, float32 sums (AVX512-BF16 or "
    "AMX; with AMX a block costs about a step). The lossless decoders keep greedy's output in each (but for "
    "last-bit ties, which the benchmarks count). docs/decoding-options.md"
)


@dataclass
class BlockSizeOptions:
    """Every decoder that drafts blocks."""

    block_size: Optional[int] = field(
        default=None, metadata={"help": "k: tokens drafted per iteration (with --draft-length adaptive: the most); "
                                        "default: the drafter's training block size (specdec, drafter-only), 3 "
                                        "(gs-jacobi, hybrid-jacobi), the rest of the input (iad), the whole output "
                                        "up to the maximum length (jacobi)",
                                "aliases": ("k", "block", "b")})


@dataclass
class DraftLengthOptions(BlockSizeOptions):
    """Every speculative decoder: how many tokens a row drafts per iteration, how the verifier multiplies."""

    draft_length: ChoiceEnum(["adaptive", "fixed", "measured"]) = field(
        default="measured", metadata={"help": DRAFT_LENGTH_HELP, "aliases": ("length",)})
    verifier_matmul: ChoiceEnum(["auto", "packed", "plain", "int8", "bf16"]) = field(
        default="auto", metadata={"help": VERIFIER_MATMUL_HELP})


@dataclass
class DrafterPathOptions:
    """Decoders that load a trained block drafter."""

    drafter_path: Optional[str] = field(
        default=None, metadata={"help": "block NAT drafter checkpoint (specdec, specdec++, drafter-only)",
                                "aliases": ("drafter",)})


HEAD_CANDIDATES = 8  # Multi30k valid, lossless specdec: 4 candidates 4.50 tokens per iteration, 8 4.60, 16 4.62


@dataclass
class HeadCandidatesOptions:
    """Decoders that draft with a trained block drafter, which may have a sequential head."""

    head_candidates: Optional[int] = field(
        default=None, metadata={"help": "with a drafter that has a sequential head: the head drafts each token among "
                                        "the block's N best at its position; 0: the block's own drafts. Default: "
                                        f"{HEAD_CANDIDATES} for specdec and drafter-only, 0 for specdec++ and with "
                                        "--beta/--tau, whose output the drafts change (there the head lowered BLEU)"})


def head_candidates(n: Optional[int], lossless: bool) -> int:
    """``--head-candidates``, checked, or its default (:data:`HEAD_CANDIDATES` when the drafts cannot change the
    output, else 0)."""
    if n is None:
        return HEAD_CANDIDATES if lossless else 0
    if n < 0:
        raise PluginError(f"--head-candidates must be >= 0, got {n}")
    return n


@dataclass
class DrafterModelOptions(DrafterPathOptions, DraftLengthOptions, HeadCandidatesOptions):
    """Speculative decoders with a trained block drafter."""


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
    "retain_dropout": (False, "--retain-dropout"),
}


def check_generation_args(args, decoding):
    """Raise one PluginError listing every generation option ``decoding`` cannot honour."""
    bad = [why for name, (neutral, why) in UNSUPPORTED.items() if getattr(args, name, None) not in (neutral, None)]
    if bad:
        raise PluginError(f"--decoding {decoding} does not support: {', '.join(bad)} (use --decoding beam)")


def check_unused_options(cfg, entry, fields):
    """Refuse decoder options that ``entry`` does not read (e.g. --drafter-path with iad).

    fields: every decoder option (name -> dataclass field), the task config's defaults."""
    own = set(entry.option_names())
    from fairseq_plugins.decoding.registry import config_value

    unused = [name for name, f in fields.items() if name not in own and config_value(cfg, name, f.default) != f.default]
    if unused:
        flags = ", ".join("--" + name.replace("_", "-") for name in unused)
        raise PluginError(f"--decoding {entry.name} does not use {flags}")


def check_block_size(block_size):
    if block_size is not None and block_size < 1:
        raise PluginError(f"--block-size must be >= 1, got {block_size}")


def check_models_device(models):
    for model in models:
        param = next(model.parameters())
        if param.dtype == torch.float16 and param.device.type == "cpu":
            raise PluginError("fp16 decoding needs a CUDA device: drop --fp16, or run on a GPU")


def speculative_config(args, block_size, vocab_size: int, beta=1, tau=0.0, adaptive=False,
                       measured=False) -> SpeculativeConfig:
    """A config from fairseq's generation options (``args``: cfg.generation); ``block_size``: k after the decoder's
    default was applied (the user's --block-size is checked before, by ``check_block_size``), 0: nothing is ever
    drafted (``--decoding greedy``); ``vocab_size``: the target dictionary's (``--beta`` chooses among that many
    tokens at most)."""
    if block_size is None or block_size < 0:
        raise ValueError(f"the decoder's builder gave block size {block_size} (was its default applied?)")
    if beta < 1:
        raise PluginError(f"--beta must be >= 1, got {beta}")
    if beta > vocab_size:
        raise PluginError(f"--beta must be at most the vocabulary size {vocab_size}, got {beta}")
    if tau < 0:
        raise PluginError(f"--tau must be >= 0, got {tau}")
    return SpeculativeConfig(
        block_size=block_size, adaptive=adaptive, measured=measured, beta=beta, tau=tau,
        max_len_a=getattr(args, "max_len_a", 0.0), max_len_b=getattr(args, "max_len_b", 200),
        min_len=getattr(args, "min_len", 1), unk_penalty=getattr(args, "unkpen", 0.0),
        len_penalty=getattr(args, "lenpen", 1.0), normalize_scores=not getattr(args, "unnormalized", False),
    )


def refuse_beam_and_set_one(args, decoding):
    """The plugin's decoders keep one hypothesis.  ``--beam N`` (N > 1) typed on the command
    line is refused (fairseq-generate's default beam 5 is not typed, and is not refused); the
    beam is then set to 1 so that fairseq-generate's BLEU line says beam=1."""
    import sys

    typed = any(arg == "--beam" or arg.startswith("--beam=") for arg in sys.argv[1:])
    if typed and getattr(args, "beam", 1) not in (None, 1):
        raise PluginError(f"--decoding {decoding} decodes greedily (one hypothesis): drop --beam {args.beam}, "
                          f"or use --decoding beam --beam {args.beam}")
    try:
        args.beam = 1
    except Exception:  # a read-only config: the BLEU line keeps its beam value
        pass
