"""``--profile``: where one iteration of a speculative decoder spends its time.

The core (``decoding.core.SpeculativeGenerator``) calls ``profiler.tick()`` once per loop
iteration and wraps its parts in ``profiler.section(name)``: "encoder" (once per batch: the
verifier's encoder, its cache, the drafter's ``start``, e.g. the drafter's own encoder),
"drafter" (``propose`` and ``update``), "verifier" (one pass over the pending token and the
draft), "accept" (acceptance, appending, cache rollback, retiring finished rows).

A :class:`TimingProfiler` is installed for ONE extra untimed pass over the sentences (so that
the timed rows are not slowed by it), then removed.  Costs are reported per iteration in
greedy-step units: one greedy step = the ``beam1`` row's total time / its decoder steps (at
batch size 1: output tokens, EOS included; at batch size B: the longest output of each batch,
as fairseq's search runs one step for the whole batch).  The encoder, run once per batch, is
amortised: the pass's encoder seconds / the pass's iterations.  "other" is the rest of the
pass (set-up before the loop, fairseq's ``inference_step``).
"""
import contextlib
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

from fairseq_plugins.bench.timing import Batch, synchronize

PARTS = ("encoder", "drafter", "verifier", "accept")


class TimingProfiler:
    """Wall seconds per section name (CUDA synchronised at both ends) and iterations."""

    def __init__(self, device: str):
        self.device = device
        self.seconds: Dict[str, float] = defaultdict(float)
        self.iterations = 0

    @contextlib.contextmanager
    def section(self, name: str):
        synchronize(self.device)
        start = time.perf_counter()
        try:
            yield
        finally:
            synchronize(self.device)
            self.seconds[name] += time.perf_counter() - start

    def tick(self):
        self.iterations += 1


@dataclass
class ProfilePass:
    """One profiled pass of a decoder over the sentences at one batch size."""

    decoder: str
    batch_size: int
    total_s: float  # wall time of the pass (every batch's run, synchronised)
    iterations: int  # loop iterations (one per batch iteration, not per sentence)
    seconds: Dict[str, float] = field(default_factory=dict)  # section -> seconds


def can_profile(generator) -> bool:
    """Generators of the speculative core expose a ``profiler`` to replace."""
    return hasattr(generator, "profiler")


def profile_pass(label: str, batch_size: int, generator, run: Callable[[Batch], object], batches: List[Batch],
                 device: str) -> ProfilePass:
    """Decode every batch once with a TimingProfiler installed on ``generator``."""
    previous, profiler = generator.profiler, TimingProfiler(device)
    generator.profiler = profiler
    total = 0.0
    try:
        for batch in batches:
            synchronize(device)
            start = time.perf_counter()
            run(batch)
            synchronize(device)
            total += time.perf_counter() - start
    finally:
        generator.profiler = previous
    return ProfilePass(label, batch_size, total, profiler.iterations, dict(profiler.seconds))


def greedy_batch_steps(greedy_row: dict, batches: List[Batch]) -> int:
    """Decoder steps of fairseq's greedy search over ``batches``: per batch, the longest
    output (EOS included) of its sentences (``greedy_row["iterations"]``, per sentence)."""
    steps = dict(zip(greedy_row["ids"], greedy_row["iterations"]))
    return sum(max(steps[i] for i in batch.ids) for batch in batches)


def summarize(found: ProfilePass, timed_row: Optional[dict], greedy_row: dict, batches: List[Batch]) -> dict:
    """The profile entry of one decoder and batch size: per-iteration costs in greedy steps.

    The parts and ``profiled`` are per iteration of the profile pass.  ``iterations`` are the
    timed row's at batch size 1 (its per-sentence counts add up to the loop's), else the
    pass's: with ``--draft-length measured`` the two passes can differ by a few iterations
    (the drafter is skipped where timings say so).  ``measured`` = the timed row's total
    time / ``iterations``, to compare with the sum of the parts."""
    greedy_steps = greedy_batch_steps(greedy_row, batches)
    step_s = greedy_row["total_s"] / greedy_steps
    per_iteration = max(1, found.iterations) * step_s  # seconds -> greedy steps per iteration
    parts = {name: found.seconds.get(name, 0.0) / per_iteration for name in PARTS}
    profiled = found.total_s / per_iteration
    iterations = sum(timed_row["iterations"]) if timed_row and found.batch_size == 1 else found.iterations
    return {
        "decoder": found.decoder, "batch_size": found.batch_size, "iterations": iterations,
        "greedy_step_ms": step_s * 1000.0, "greedy_steps_per_iteration": greedy_steps / max(1, iterations),
        **parts, "other": profiled - sum(parts.values()), "profiled": profiled,
        "measured": timed_row["total_s"] / (max(1, iterations) * step_s) if timed_row else None,
        "seconds": {**{name: found.seconds.get(name, 0.0) for name in PARTS}, "total": found.total_s},
    }


def summarize_all(passes: List[ProfilePass], rows: List[dict], batches_by_size: Dict[int, List[Batch]],
                  greedy_label: str) -> List[dict]:
    """Every profiled pass, in units of the greedy row of its batch size."""
    def find(label, bs):
        return next((r for r in rows if r["decoder"] == label and r["engine"] == "fairseq"
                     and r["batch_size"] == bs), None)

    entries = []
    for found in passes:
        greedy_row = find(greedy_label, found.batch_size)
        if greedy_row is not None:
            entries.append(summarize(found, find(found.decoder, found.batch_size), greedy_row,
                                     batches_by_size[found.batch_size]))
    return entries
