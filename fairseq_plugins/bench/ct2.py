"""Optional CTranslate2 rows: the same verifier converted to CTranslate2 (with the setters
of its fairseq converter), timed with greedy search and beam 5 on the same batches and
thread count, under fairseq's length limits, so that greedy output is fairseq's; one pair of
rows per compute type (``--ct2-compute-types``: float32 and int8, and int16 and bfloat16 where
this CTranslate2 build has them on the device), labelled e.g. ``beam1 int8``.

Nothing here is needed by the rest of the harness: without the ``ctranslate2`` package
(or when the conversion fails, e.g. an architecture CTranslate2 does not support) the
rows are skipped with the reason.
"""
import ast
import os
import tempfile
from typing import Dict, List, Optional, Tuple

from fairseq_plugins.bench.timing import Batch, Output

BEAMS = (("beam1", 1), ("beam5", 5))  # row label (before the compute type) -> CTranslate2 beam_size
AUTO_COMPUTE_TYPES = ("float32", "int8", "int16", "bfloat16")  # --ct2-compute-types auto (float16 first with --fp16)
KNOWN_COMPUTE_TYPES = ("float32", "float16", "bfloat16", "int16", "int8", "int8_float32", "int8_float16",
                       "int8_bfloat16", "default")  # CTranslate2's names of compute types


def compute_type_problems(requested: str) -> List[str]:
    """The names in ``--ct2-compute-types`` that are no CTranslate2 compute type (a one-line error each)."""
    if requested == "auto":
        return []
    unknown = [name.strip() for name in requested.split(",") if name.strip() not in KNOWN_COMPUTE_TYPES]
    return [f"--ct2-compute-types: {name!r} is not a CTranslate2 compute type (one of auto, "
            f"{', '.join(KNOWN_COMPUTE_TYPES)}; --no-ctranslate2 for no CTranslate2 rows)" for name in unknown]


def import_ctranslate2() -> Tuple[object, Optional[str]]:
    """(module, None), or (None, why it is unavailable)."""
    try:
        import ctranslate2
    except ImportError as error:
        return None, f"the ctranslate2 package is not installed ({error}); `pip install ctranslate2` to add the row"
    return ctranslate2, None


# fairseq --activation-fn -> CTranslate2 Activation member (those its fairseq converter accepts)
ACTIVATIONS = {"relu": "RELU", "gelu": "GELU", "gelu_accurate": "GELUTanh", "gelu_fast": "GELUTanh",
               "swish": "SWISH"}


def convert(ctranslate2, engine, checkpoint: str, output_dir: str) -> str:
    """Write the verifier in CTranslate2's format unless ``output_dir`` has a model.

    CTranslate2's ``FairseqConverter`` cannot load our checkpoints itself (it unpickles
    them with ``weights_only=True`` and rebuilds the task from the model config), so the
    model is loaded here, as the harness loads it, and its weights are handed to the
    converter's own per-module setters.
    """
    stamp, stamp_path = checkpoint_stamp(checkpoint), os.path.join(output_dir, "converted_from.txt")
    if os.path.exists(os.path.join(output_dir, "model.bin")) and read_text(stamp_path) == stamp:
        return output_dir
    model = load_cpu_model(engine, checkpoint)
    spec = transformer_spec(ctranslate2, model)
    fill_weights(ctranslate2, spec, model)
    spec.register_source_vocabulary(vocabulary(engine.src_dict))
    spec.register_target_vocabulary(vocabulary(engine.tgt_dict))
    spec.config.decoder_start_token = spec.config.eos_token  # fairseq starts the target with EOS
    spec.config.add_source_eos = True  # and ends the source with it
    spec.validate()
    spec.optimize()
    os.makedirs(output_dir, exist_ok=True)
    spec.save(output_dir)
    with open(stamp_path, "w") as f:
        f.write(stamp)
    return output_dir


def checkpoint_stamp(checkpoint: str) -> str:
    """Which checkpoint file a conversion came from (path, size, mtime): a reused ``--ct2-dir``
    holding another model's conversion is converted again, not timed."""
    info = os.stat(checkpoint)
    return f"{os.path.abspath(checkpoint)}\t{info.st_size}\t{info.st_mtime_ns}\n"


def read_text(path: str) -> Optional[str]:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def load_cpu_model(engine, checkpoint: str):
    """The verifier loaded again, on the CPU in float32 (the converter reads numpy weights)."""
    from fairseq import checkpoint_utils, utils

    paths = utils.split_paths(checkpoint)
    if len(paths) != 1:
        raise ValueError(f"CTranslate2 converts one checkpoint, --path names {len(paths)}")
    overrides = ast.literal_eval(engine.cfg.common_eval.model_overrides)
    models, _ = checkpoint_utils.load_model_ensemble(paths, arg_overrides=overrides, task=engine.task)
    return models[0].eval()


def transformer_spec(ctranslate2, model):
    """CTranslate2's empty ``TransformerSpec`` for a fairseq transformer (any arch preset)."""
    from fairseq.models.transformer import TransformerModelBase

    if not isinstance(model, TransformerModelBase):
        raise ValueError(f"CTranslate2 converts fairseq transformers, not {type(model).__name__}")
    cfg = model.cfg
    problems = [message for failed, message in (
        (cfg.activation_fn not in ACTIVATIONS, f"--activation-fn {cfg.activation_fn} is not supported"),
        (cfg.no_token_positional_embeddings, "--no-token-positional-embeddings is not supported"),
        (cfg.adaptive_softmax_cutoff is not None, "--adaptive-softmax-cutoff is not supported"),
        (cfg.encoder.normalize_before != cfg.decoder.normalize_before,
         "encoder and decoder must both be pre-norm or both post-norm"),
        (cfg.encoder.attention_heads != cfg.decoder.attention_heads,
         "encoder and decoder must have the same number of attention heads"),
    ) if failed]
    if problems:
        raise ValueError("cannot convert the verifier to CTranslate2: " + "; ".join(problems))
    return ctranslate2.specs.TransformerSpec.from_config(
        (cfg.encoder.layers, cfg.decoder.layers), cfg.encoder.attention_heads, pre_norm=cfg.encoder.normalize_before,
        activation=getattr(ctranslate2.specs.Activation, ACTIVATIONS[cfg.activation_fn]),
        layernorm_embedding=cfg.layernorm_embedding)


def fill_weights(ctranslate2, spec, model):
    """Copy the encoder and decoder weights into ``spec`` with the fairseq converter's setters."""
    import torch

    setters = ctranslate2.converters.fairseq
    with torch.no_grad():
        setters.set_transformer_encoder(spec.encoder, model.encoder)
        setters.set_transformer_decoder(spec.decoder, model.decoder)


def vocabulary(dictionary) -> List[str]:
    """A fairseq dictionary's symbols in id order, padding renamed as CTranslate2 expects."""
    symbols = list(dictionary.symbols)
    symbols[dictionary.pad()] = "<blank>"
    return symbols


def compute_types(ctranslate2, requested: str, device: str, fp16: bool) -> Tuple[List[str], List[str]]:
    """(the compute types to run, the requested ones this build lacks on ``device``): ``requested`` is a
    comma-separated list, or ``auto``: :data:`AUTO_COMPUTE_TYPES` (float16 first with ``fp16``), those supported."""
    supported = set(ctranslate2.get_supported_compute_types(device))
    if requested == "auto":
        auto = ("float16", *AUTO_COMPUTE_TYPES[1:]) if fp16 else AUTO_COMPUTE_TYPES
        return [name for name in auto if name in supported], []
    wanted = list(dict.fromkeys(name.strip() for name in requested.split(",") if name.strip()))
    return [name for name in wanted if name in supported], [name for name in wanted if name not in supported]


def make_translator(ctranslate2, model_dir: str, device: str, threads: int, compute_type: str):
    return ctranslate2.Translator(model_dir, device=device, compute_type=compute_type,
                                  inter_threads=1, intra_threads=threads)


def sources(engine, batches: List[Batch]) -> Dict[int, List[str]]:
    """Source symbols of every sentence in ``batches``."""
    return {i: engine.source_symbols(i) for batch in batches for i in batch.ids}


def max_length(generation, longest_source: int, max_positions: int) -> int:
    """fairseq's SequenceGenerator cap on output tokens before EOS: ``a * source length + b``
    (source length with EOS, the longest in the batch), at most the decoder's positions - 1."""
    return min(int(generation.max_len_a * longest_source + generation.max_len_b), max_positions - 1)


def runner(translator, symbols: Dict[int, List[str]], beam: int, generation, max_positions: int):
    """``run(batch)``: one ``translate_batch`` call with fairseq's length limits."""
    def run(batch: Batch):
        source = [symbols[i] for i in batch.ids]
        limit = max_length(generation, max(len(s) for s in source) + 1, max_positions)
        return translator.translate_batch(source, beam_size=beam, max_batch_size=0, max_decoding_length=limit,
                                          min_decoding_length=generation.min_len, length_penalty=generation.lenpen)

    return run


def outputs(beam: int):
    """One ``Output`` per sentence; greedy search takes one step per token (+ EOS)."""
    def convert(results, batch: Batch) -> List[Output]:
        converted = []
        for result in results:
            tokens = list(result.hypotheses[0])
            steps = len(tokens) + 1 if beam == 1 else None
            converted.append(Output(tokens, steps, steps))
        return converted

    return convert


def reason(error: Exception) -> str:
    """``Type: first line of the message`` (torch's unpickling errors run to many lines)."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


class Workspace:
    """Where the converted model lives: ``--ct2-dir`` (kept), else a temporary folder."""

    def __init__(self, path: Optional[str]):
        self._tmp = None if path else tempfile.TemporaryDirectory(prefix="ct2-")
        self.path = path or self._tmp.name

    def close(self):
        if self._tmp is not None:
            self._tmp.cleanup()
