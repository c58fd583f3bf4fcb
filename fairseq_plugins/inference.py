"""Sentences through a fairseq task's generator: encode, check lengths, collate, run
``task.inference_step`` and put the best hypotheses back in input order.

The one inference path of the Python API (:mod:`fairseq_plugins.api`) and of sequence-level
distillation (:mod:`fairseq_plugins.scripts.distill`); fairseq-interactive does the same steps.
"""
from typing import List, Optional, Sequence

import torch

from fairseq_plugins_compat.errors import PluginError

PREVIEW_CHARS = 40


def encode(dictionary, line: str) -> torch.Tensor:
    """Token ids (S,) of one preprocessed line, eos appended, unknown words -> unk."""
    return dictionary.encode_line(line, add_if_not_exist=False, append_eos=True).long()


def max_source_tokens(task, models) -> Optional[int]:
    """The longest source (tokens incl. eos) the task and every model take; None: no limit."""
    from fairseq import utils

    limits = utils.resolve_max_positions(task.max_positions(), *[m.max_positions() for m in models])
    if isinstance(limits, (tuple, list)):
        limits = limits[0]
    return int(limits) if isinstance(limits, (int, float)) else None


def _preview(text: str) -> str:
    return repr(text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + "...")


def check_source_lengths(tokens: Sequence[torch.Tensor], limit: Optional[int], sentences: Sequence[str]):
    """One :class:`PluginError` naming the first input longer than ``limit`` tokens."""
    if limit is None:
        return
    for index, (ids, sentence) in enumerate(zip(tokens, sentences)):
        if len(ids) > limit:
            raise PluginError(f"sentence {index} ({_preview(sentence)}) has {len(ids)} tokens, more than the "
                              f"{limit} source tokens the model takes: shorten or split it")


def collate(task, tokens: List[torch.Tensor], device=None) -> dict:
    """A fairseq sample of the given sources (ids 0..B-1; the collater sorts by length)."""
    from fairseq import utils

    dataset = task.build_dataset_for_inference(tokens, [len(t) for t in tokens])
    sample = dataset.collater([dataset[i] for i in range(len(tokens))])
    if device is not None:
        sample = utils.apply_to_sample(lambda t: t.to(device), sample)
    return sample


@torch.no_grad()
def best_hypotheses(task, generator, models, tokens: List[torch.Tensor], first_id: int = 0) -> List[dict]:
    """Best hypothesis (fairseq dict: tokens, score, steps, ...) of each source, in input order.

    tokens: B sources (S_b,), each ending in eos; one batch, on the models' device.
    first_id: the sentence id of ``tokens[0]`` (ids are what the decoders' statistics count)."""
    device = next(models[0].parameters()).device
    sample = collate(task, tokens, device)
    sample["id"] = sample["id"] + first_id
    hypotheses = task.inference_step(generator, models, sample)
    best = [None] * len(tokens)
    for position, sentence_id in enumerate(sample["id"].tolist()):
        best[sentence_id - first_id] = hypotheses[position][0]
    return best
