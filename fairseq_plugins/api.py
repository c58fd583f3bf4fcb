"""Python API: load a verifier (and drafter) once, translate lists of strings.

    from fairseq_plugins.api import Translator
    translator = Translator.load("verifier.pt", "data-bin/", drafter="drafter.pt",
                                 decoding="specdec", sentencepiece_model="spm.model")
    translator.translate(["Ein Mann fährt Fahrrad ."])

Any ``--decoding`` of the plugin works (``beam`` is fairseq's own search).
"""
import os
from dataclasses import dataclass
from typing import List, Optional

import torch
from omegaconf import OmegaConf

import fairseq_plugins  # noqa: F401  (registers the task and the decoders)
from fairseq_plugins import inference
from fairseq_plugins_compat.cli import load_sentencepiece
from fairseq_plugins_compat.errors import PluginError


@dataclass
class GenerationOptions:
    """The fairseq-generate options the decoders read (``cfg.generation``)."""

    beam: int = 1
    nbest: int = 1
    max_len_a: float = 0.0
    max_len_b: int = 200
    min_len: int = 1
    lenpen: float = 1.0
    unkpen: float = 0.0
    unnormalized: bool = False


class Translator:
    """A loaded task + verifier + generator; ``translate`` takes and returns strings."""

    def __init__(self, task, models, generator, sentencepiece=None):
        self.task, self.models, self.generator = task, models, generator
        self.sentencepiece = sentencepiece

    @classmethod
    def load(cls, verifier: str, data: str, drafter: Optional[str] = None, decoding: str = "specdec",
             source_lang: Optional[str] = None, target_lang: Optional[str] = None,
             sentencepiece_model: Optional[str] = None, device: str = "cpu", **options):
        """``options``: task options (block_size, beta, tau, iad_match_length, ...) and
        generation options (beam, max_len_a, max_len_b, ...)."""
        from fairseq import checkpoint_utils, tasks

        from fairseq_plugins.decoding.registry import decoder_names

        for what, path in (("verifier checkpoint", verifier), ("drafter checkpoint", drafter),
                           ("sentencepiece model", sentencepiece_model)):
            if path is not None and not os.path.isfile(path):
                raise PluginError(f"{what} not found: {path}")
        if decoding not in decoder_names():
            raise PluginError(f"unknown decoding {decoding!r}; choose from {', '.join(decoder_names())}")
        spm = load_sentencepiece(sentencepiece_model) if sentencepiece_model else None
        generation = GenerationOptions(**{k: options.pop(k) for k in list(options) if hasattr(GenerationOptions, k)})
        task_cfg = OmegaConf.create({"_name": "speculative_translation", "data": data, "source_lang": source_lang,
                                     "target_lang": target_lang, "decoding": decoding, "drafter_path": drafter, **options})
        task = tasks.setup_task(task_cfg)
        models, _cfg = checkpoint_utils.load_model_ensemble([verifier], task=task)
        for model in models:
            model.to(device).eval()
        generator = task.build_generator(models, generation)
        return cls(task, models, generator, spm)

    def encode(self, sentence: str) -> torch.Tensor:
        text = " ".join(self.sentencepiece.encode(sentence, out_type=str)) if self.sentencepiece else sentence
        return inference.encode(self.task.source_dictionary, text)

    def decode(self, tokens: torch.Tensor) -> str:
        text = self.task.target_dictionary.string(tokens, bpe_symbol="sentencepiece" if self.sentencepiece else None)
        return text

    def translate_tokens(self, sentences: List[str], batch_size: int = 1) -> List[dict]:
        """Best hypothesis (fairseq dict: tokens, score, steps, ...) for each sentence, in order.

        Sentences are decoded ``batch_size`` at a time, shortest first (``inference.decode_in_batches``, as
        fairseq-generate batches). Raises :class:`PluginError` naming the first sentence longer than the models
        take, before translating any (with every ``decoding``)."""
        if isinstance(sentences, str):
            raise PluginError("translate() takes a list of sentences, not a string")
        tokens = [self.encode(s) for s in sentences]
        inference.check_source_lengths(tokens, inference.max_source_tokens(self.task, self.models), sentences)
        return inference.decode_in_batches(self.task, self.generator, self.models, tokens, batch_size)

    def translate(self, sentences: List[str], batch_size: int = 1) -> List[str]:
        return [self.decode(h["tokens"]) for h in self.translate_tokens(sentences, batch_size)]
