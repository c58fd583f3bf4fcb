"""Optional CTranslate2 rows: the same verifier converted with CTranslate2's fairseq
converter, timed with greedy search and beam 5 on the same batches and thread count.

Nothing here is needed by the rest of the harness: without the ``ctranslate2`` package
(or when the conversion fails, e.g. an architecture CTranslate2 does not support) the
rows are skipped with the reason.
"""
import inspect
import os
import tempfile
from typing import Dict, List, Optional, Tuple

from fairseq_plugins.bench.timing import Batch, Output

BEAMS = (("beam1", 1), ("beam5", 5))  # row label -> CTranslate2 beam_size


def import_ctranslate2() -> Tuple[object, Optional[str]]:
    """(module, None), or (None, why it is unavailable)."""
    try:
        import ctranslate2
    except ImportError as error:
        return None, f"the ctranslate2 package is not installed ({error}); `pip install ctranslate2` to add the row"
    return ctranslate2, None


def convert(ctranslate2, engine, checkpoint: str, data: str, output_dir: str) -> str:
    """Convert the verifier (like ``ct2-fairseq-converter``) unless ``output_dir`` has a model."""
    if os.path.exists(os.path.join(output_dir, "model.bin")):
        return output_dir
    from fairseq_plugins.bench.fairseq_engine import PLUGIN_DIR

    converter_cls = ctranslate2.converters.FairseqConverter
    kwargs = {"source_lang": engine.task.cfg.source_lang, "target_lang": engine.task.cfg.target_lang}
    if "user_dir" in inspect.signature(converter_cls.__init__).parameters:
        kwargs["user_dir"] = PLUGIN_DIR
    converter_cls(checkpoint, data, **kwargs).convert(output_dir, force=True)
    return output_dir


def make_translator(ctranslate2, model_dir: str, device: str, threads: int, fp16: bool):
    compute_type = "float16" if fp16 else "default"
    return ctranslate2.Translator(model_dir, device=device, compute_type=compute_type,
                                  inter_threads=1, intra_threads=threads)


def sources(engine, batches: List[Batch]) -> Dict[int, List[str]]:
    """Source symbols of every sentence in ``batches``."""
    return {i: engine.source_symbols(i) for batch in batches for i in batch.ids}


def runner(translator, symbols: Dict[int, List[str]], beam: int, generation):
    """``run(batch)``: one ``translate_batch`` call with fairseq's length limits."""
    def run(batch: Batch):
        source = [symbols[i] for i in batch.ids]
        longest = max(len(s) for s in source) + 1  # + EOS, as fairseq's src_tokens.size(1)
        max_len = int(generation.max_len_a * longest + generation.max_len_b)
        return translator.translate_batch(source, beam_size=beam, max_batch_size=0, max_decoding_length=max_len,
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


class Workspace:
    """Where the converted model lives: ``--ct2-dir`` (kept), else a temporary folder."""

    def __init__(self, path: Optional[str]):
        self._tmp = None if path else tempfile.TemporaryDirectory(prefix="ct2-")
        self.path = path or self._tmp.name

    def close(self):
        if self._tmp is not None:
            self._tmp.cleanup()
