"""The one builder of the speculative decoders: checks fairseq's options, loads a drafter
checkpoint when the decoder needs one, and returns a ``SpeculativeGenerator``."""
import atexit
import logging
import os

import torch

from fairseq_plugins.decoding import linears, options
from fairseq_plugins.decoding.acceptance import is_lossless
from fairseq_plugins.decoding.core import SpeculativeGenerator
from fairseq_plugins.decoding.incremental import check_supported_decoder
from fairseq_plugins_compat.errors import PluginError

logger = logging.getLogger(__name__)


def build_speculative(task, models, args, name, drafter, opts, block_size, beta=1, tau=0.0):
    """A generator for ``--decoding name`` with ``drafter`` (a ``drafters.Drafter``).

    opts: the decoder's options (``options.DraftLengthOptions`` or a subclass);
    block_size: k after the decoder's own default was applied (0: draft nothing)."""
    options.check_generation_args(args, name)
    options.check_models_device(models)
    if len(models) != 1:
        raise PluginError(f"--decoding {name} verifies with one model; got an ensemble of {len(models)}")
    check_supported_decoder(getattr(models[0], "decoder", None))  # here, not at the first batch's verifier cache
    length = str(opts.draft_length)
    lossless = is_lossless(beta, tau)  # measured: SpecDec++'s output depends on the drafts, so not on timings
    adaptive = length == "adaptive" or (length == "measured" and drafter.failures_persist)
    cfg = options.speculative_config(args, block_size, len(task.target_dictionary), beta, tau, adaptive=adaptive,
                                     measured=length == "measured" and lossless)
    options.refuse_beam_and_set_one(args, name)
    generator = SpeculativeGenerator(models[0], task.target_dictionary, drafter, cfg,
                                     verifier_linear=verifier_linear(str(opts.verifier_matmul), models[0], name),
                                     name=name)
    log_stats_at_exit(generator.stats, name)
    return generator


def verifier_linear(choice: str, verifier, name: str = "decoding"):
    """How the verifier cache runs an ``nn.Linear`` (``--verifier-matmul``) on a float32 CPU
    model: ``auto``: float16-stored weights where they are float16 numbers
    (``HalfWeightLinears``), oneDNN-packed float32 for the others; ``packed``: oneDNN-packed
    float32 for all; ``plain`` (and CUDA, other dtypes, a PyTorch without those kernels): ``F.linear``;
    ``int8``: ``RowInt8Linears``; ``bf16``: ``Bfloat16Linears``, the output layer as in ``auto``
    (``int8`` and ``bf16``: a one-line error where they cannot run)."""
    param = next(verifier.parameters())
    if choice == "int8":
        return row_int8_linears(param, name)
    if choice == "bf16":
        return bfloat16_linears(verifier, param, name)
    if choice == "plain" or param.device.type != "cpu" or param.dtype != torch.float32:
        return linears.float_linear
    if choice != "auto":
        return linears.packed_or_plain()
    if linears.half_weights_available() and all(linears.half_exact(p) for p in verifier.parameters() if p.dim() == 2):
        logger.info(f"{name}: the verifier's weights are float16 numbers: its products read them stored as "
                    "float16, in float32 arithmetic (--verifier-matmul packed: float32 storage)")
    return linears.float32_linears()


def check_float32_cpu(param, name: str, choice: str):
    """A one-line error unless the verifier is float32 on a CPU (what ``--verifier-matmul choice`` runs)."""
    if param.device.type != "cpu" or param.dtype != torch.float32:
        raise PluginError(f"--decoding {name} --verifier-matmul {choice} runs a float32 verifier on a CPU; "
                          f"this one is {str(param.dtype).replace('torch.', '')} on {param.device.type}")


def row_int8_linears(param, name: str):
    """``--verifier-matmul int8``'s products, or a one-line error naming what is missing."""
    check_float32_cpu(param, name, "int8")
    if not linears.row_int8_available():
        raise PluginError(f"--decoding {name} --verifier-matmul int8 needs PyTorch's fbgemm int8 kernels (x86 CPU), "
                          "which this PyTorch lacks: use --verifier-matmul auto")
    return linears.RowInt8Linears()


def bfloat16_linears(verifier, param, name: str):
    """``--verifier-matmul bf16``'s products (the output layer's as ``auto``'s: float32 logits), or a one-line
    error naming what is missing."""
    check_float32_cpu(param, name, "bf16")
    if not linears.bfloat16_available():
        raise PluginError(f"--decoding {name} --verifier-matmul bf16 needs oneDNN's bfloat16 kernels (an x86 CPU "
                          "with AVX512-BF16 or AMX), which this CPU or PyTorch lacks: use --verifier-matmul auto")
    output = getattr(verifier.decoder, "output_projection", None)
    return linears.Bfloat16Linears([] if output is None else [output], linears.float32_linears())


def log_stats_at_exit(stats, name):
    """The decoder's statistics (iterations, tokens per iteration) are logged when the run ends."""
    atexit.register(stats.log_summary, name)


def load_drafter(task, verifier, path, decoding, block_size=None):
    """Load a block drafter checkpoint onto the verifier's device/dtype and check that it
    can serve the verifier (one line listing every problem otherwise)."""
    from fairseq import checkpoint_utils

    from fairseq_plugins.decoding.compatibility import check_compatibility

    if not path:
        raise PluginError(f"--decoding {decoding} needs --drafter-path (a block drafter checkpoint)")
    try:
        models, _cfg, drafter_task = checkpoint_utils.load_model_ensemble_and_task([path])
    except FileNotFoundError as missing:  # trained elsewhere: its data folder is not on this machine
        models, drafter_task = load_with_dictionaries_of(task, path, missing)
    drafter = models[0]
    param = next(verifier.parameters())
    drafter.to(device=param.device, dtype=param.dtype)
    check_compatibility(drafter, verifier, drafter_task.target_dictionary, task.target_dictionary, block_size)
    task.extra_max_positions = drafter.max_positions()
    return drafter


def load_with_dictionaries_of(task, path, missing):
    """Load a drafter whose saved data folder is gone (``missing``) with the dictionaries of the
    generation task (the verifier's) instead; a drafter whose embeddings do not fit them is a
    one-line error."""
    from fairseq import checkpoint_utils

    data = getattr(getattr(task, "cfg", None), "data", None)
    if not data:
        raise PluginError(f"drafter {path}: its dictionaries are not here ({missing.filename})") from None
    try:
        models, _cfg, drafter_task = checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides={"data": data})
    except RuntimeError as error:  # size mismatch in load_state_dict
        raise PluginError(f"drafter {path} does not fit the verifier's dictionaries in {data} (its own, "
                          f"{missing.filename}, is not here): {str(error).splitlines()[-1].strip()}") from None
    except FileNotFoundError as other:  # trained on other languages than the verifier's data holds
        raise PluginError(f"drafter {path} was trained on other languages: {data} has no "
                          f"{os.path.basename(other.filename)} (is it this verifier's drafter?)") from None
    return models, drafter_task
