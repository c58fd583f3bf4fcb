"""Timing several rows in turns, so that their ratios survive a machine whose speed drifts.

The sentences are cut into R interleaved chunks (chunk r = batches r, r + R, r + 2R... of the
length-sorted batches, so every chunk has the same mix of lengths).  In round r every row
decodes chunk r, one row after the other (after one untimed batch of it, so that it starts on warm
caches); a row's time is the sum over the rounds.  A shared or throttled CPU that slows down
during the run then slows every row alike, instead of the rows timed last; the per-round ratios
between two rows show how much a ratio still moves.
"""
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from fairseq_plugins.bench.timing import Batch, Output, SentenceResult, batch_times, time_batches, warm_up

Convert = Callable[[object, Batch], List[Output]]
GreedyOutputs = Dict[int, List[int]]  # sentence id -> greedy output token ids, EOS included


@dataclass
class Row:
    """One timed row: ``run(batch)`` is the only timed call, ``convert(raw, batch)`` reads its
    outputs afterwards.  ``replay(batches, greedy)`` -> (batches, convert), for rows built from
    the greedy row's outputs of the same chunk (oracle, bound); ``optional`` rows (a third-party
    engine) are dropped when decoding raises, instead of stopping the run."""

    label: str
    engine_name: str
    run: Callable[[Batch], object]
    convert: Convert
    batches: List[Batch]
    is_greedy: bool = False
    replay: Optional[Callable[[List[Batch], GreedyOutputs], Tuple[List[Batch], Convert]]] = None
    optional: bool = False

    @property
    def key(self) -> Tuple[str, str]:
        return self.label, self.engine_name


@dataclass
class Timed:
    """A row's results over all rounds, and its total time in each round."""

    results: Dict[int, SentenceResult] = field(default_factory=dict)
    round_s: List[float] = field(default_factory=list)


def interleaved_chunks(batches: Sequence[Batch], rounds: int) -> List[List[Batch]]:
    """``rounds`` chunks (fewer when there are fewer batches): chunk r = batches r, r + R, ..."""
    rounds = max(1, min(rounds, len(batches)))
    return [list(batches[r::rounds]) for r in range(rounds)]


def time_in_rounds(rows: List[Row], rounds: int, warmup: int, device: str, progress=None,
                   on_failure: Callable[[Row, Exception], None] = None) -> Dict[Tuple[str, str], Timed]:
    """Time every row on every chunk, the rows taking turns within each round (in ``rows``
    order; the greedy row must come before the rows replaying it).  Each row decodes
    ``warmup`` sentences of the first chunk untimed before its first timing, and (``warmup`` > 0)
    the first batch of each later chunk untimed before timing that chunk: a row is not timed on the
    caches the rows before it evicted (CTranslate2 greedy took 5-12 % longer on 10 test2016 sentences
    right after stock greedy than right after itself).
    Returns row key -> ``Timed`` (failed optional rows are absent; ``on_failure`` was told)."""
    chunks_of = {row.key: interleaved_chunks(row.batches, rounds) for row in rows}
    greedy: GreedyOutputs = {}
    timed = {row.key: Timed() for row in rows}
    active = list(rows)
    for r in range(max(len(chunks) for chunks in chunks_of.values())):
        for row in list(active):
            if progress is not None:
                progress.set_description(f"round {r + 1}: {row.label} ({row.engine_name})")
            try:
                batches, convert = prepare(row, chunks_of[row.key][r], greedy)
                warm_up(row.run, batches, warmup if r == 0 else min(warmup, 1), device)
                results = time_batches(row.run, convert, batches, device, progress)
            except Exception as error:  # only optional rows survive their failures
                if not row.optional:
                    raise
                active.remove(row)
                del timed[row.key]
                if on_failure is not None:
                    on_failure(row, error)
                continue
            timed[row.key].results.update(results)
            timed[row.key].round_s.append(sum(batch_times(results, batches)))
            if row.is_greedy:
                greedy.update({i: result.output.tokens for i, result in results.items()})
    return timed


def prepare(row: Row, chunk: List[Batch], greedy: GreedyOutputs) -> Tuple[List[Batch], Convert]:
    """What ``row`` decodes of ``chunk`` and how its outputs are read (replaying rows: from
    the greedy outputs of the chunk's sentences)."""
    if row.replay is None:
        return chunk, row.convert
    return row.replay(chunk, greedy)


def round_ratios(baseline: List[float], row: List[float]) -> List[float]:
    """Per-round speedups of a row over the baseline: baseline time / row time, round by round."""
    return [b / t for b, t in zip(baseline, row) if t > 0]
