"""Timing a decoder over pre-built batches: wall clock per batch (CUDA synchronised),
untimed warm-up, and the per-sentence outputs the report needs.

Every engine (a fairseq generator, CTranslate2) is timed by the same loop: ``run(batch)``
is the only timed call; ``outputs(raw, batch)`` turns its result into one ``Output`` per
sentence afterwards, outside the clock.
"""
import math
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

import torch


@dataclass
class Batch:
    """Sentence ids (dataset indices) and whatever the engine decodes (a fairseq sample...)."""

    ids: List[int]
    payload: object


@dataclass
class Output:
    """One sentence's result: output symbols (no EOS), iterations and accepted tokens."""

    symbols: List[str]
    steps: Optional[int] = None  # decoder iterations; None when unknown (beam search)
    accepted: Optional[int] = None  # tokens produced in those iterations (EOS included)
    tokens: Optional[List[int]] = None  # output token ids, EOS included (fairseq engines)


@dataclass
class SentenceResult:
    output: Output
    latency_s: float  # wall time of the batch the sentence was decoded in


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), ``q`` in [0, 100]."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    position = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def synchronize(device: str):
    """Wait for queued CUDA kernels, so that a clock read after it includes them."""
    if device == "cuda":
        torch.cuda.synchronize()


def warm_up(run: Callable, batches: List[Batch], sentences: int, device: str):
    """Decode batches (untimed) until ``sentences`` sentences have been decoded."""
    done = 0
    for batch in batches:
        if done >= sentences:
            break
        run(batch)
        done += len(batch.ids)
    synchronize(device)


def time_batches(run: Callable, outputs: Callable, batches: List[Batch], device: str,
                 progress=None) -> Dict[int, SentenceResult]:
    """Time ``run`` on every batch; sentence id -> result."""
    results: Dict[int, SentenceResult] = {}
    for batch in batches:
        synchronize(device)
        start = time.perf_counter()
        raw = run(batch)
        synchronize(device)
        elapsed = time.perf_counter() - start
        for sentence_id, output in zip(batch.ids, outputs(raw, batch)):
            results[sentence_id] = SentenceResult(output, elapsed)
        if progress is not None:
            progress.update(len(batch.ids))
    return results


def batch_times(results: Dict[int, SentenceResult], batches: List[Batch]) -> List[float]:
    """Wall time of each batch (the latency of each of its sentences)."""
    return [results[batch.ids[0]].latency_s for batch in batches]
