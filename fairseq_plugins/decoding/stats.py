"""Per-sentence and per-run statistics of speculative decoding, and the draft/verify trace.

``DecodingStats`` lives as long as the generator: every batch adds its sentences, and
``summary()`` gives mean accepted tokens per iteration, mean iterations per sentence and
the histogram of tokens gained per iteration.
"""
import collections
import logging
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from torch import Tensor

logger = logging.getLogger(__name__)


@dataclass
class TraceStep:
    """One iteration of one sentence: what was drafted, what the verifier chose after
    each drafted prefix, and how many tokens became final (drafts accepted + 1).

    ``choice_probs`` (k+1) and ``draft_probs`` (k): the verifier's probability of each
    choice and of each drafted token, when the core passed its log-probs (else None)."""

    drafts: List[int]
    choices: List[int]
    gained: int
    choice_probs: Optional[List[float]] = None
    draft_probs: Optional[List[float]] = None


@dataclass
class BatchTrace:
    keep_steps: bool
    steps: Dict[int, List[TraceStep]] = field(default_factory=lambda: collections.defaultdict(list))
    gained: Dict[int, List[int]] = field(default_factory=lambda: collections.defaultdict(list))

    def record(self, rows: Tensor, drafts: Tensor, choices: Tensor, n_new: Tensor, lprobs: Tensor = None):
        """rows (B,), drafts (B, k), choices (B, k+1), n_new (B,); lprobs (B, k+1, V), the
        verifier's log-probs, is read only when steps are kept (for their probabilities)."""
        rows_list, n_list = rows.tolist(), n_new.tolist()
        probs = _step_probs(lprobs, drafts, choices) if self.keep_steps and lprobs is not None else None
        for i, (row, n) in enumerate(zip(rows_list, n_list)):
            self.gained[row].append(n)
            if self.keep_steps:
                step = TraceStep(drafts[i].tolist(), choices[i].tolist(), n)
                if probs is not None:
                    step.choice_probs, step.draft_probs = probs[0][i], probs[1][i]
                self.steps[row].append(step)

    def row_summary(self, row: int) -> dict:
        """Extra hypothesis fields: ``steps`` (iterations, fairseq's --print-step) and gains."""
        return {"steps": len(self.gained[row]), "accepted_per_iteration": list(self.gained[row])}


def _step_probs(lprobs: Tensor, drafts: Tensor, choices: Tensor):
    """Probabilities of choices (B, k+1) and of drafts (B, k) under lprobs (B, k+1, V), as lists."""
    choice = lprobs.gather(2, choices.unsqueeze(-1)).squeeze(-1).exp()
    draft = lprobs[:, :-1].gather(2, drafts.unsqueeze(-1)).squeeze(-1).exp()
    return choice.tolist(), draft.tolist()


class DecodingStats:
    """Accumulates sentences over batches, once per sentence id: a sentence decoded again
    (a warm-up, a repeated timing) replaces its earlier record instead of adding one."""

    def __init__(self, keep_trace: bool = False):
        self.keep_trace = keep_trace
        self.gains: Dict[object, List[int]] = {}  # sentence id -> tokens gained per iteration
        self.traces: List[BatchTrace] = []
        self.loop_iterations = 0  # iterations of the loop (a batch's, all rows together)
        self.undrafted = 0  # of them, without drafting (--draft-length measured)

    def count_iteration(self, drafted: bool):
        self.loop_iterations += 1
        self.undrafted += not drafted

    def start_batch(self) -> BatchTrace:
        return BatchTrace(keep_steps=self.keep_trace)

    def end_batch(self, trace: BatchTrace, ids: Optional[List[object]] = None):
        """ids: the sentence id of each batch row (fairseq's ``sample["id"]``); None: new ids."""
        for row, gains in trace.gained.items():
            key = ids[row] if ids is not None else ("anonymous", len(self.gains))
            self.gains[key] = list(gains)
        if self.keep_trace:
            self.traces.append(trace)

    @property
    def iterations(self) -> List[int]:
        return [len(g) for g in self.gains.values()]

    @property
    def histogram(self) -> collections.Counter:
        return collections.Counter(g for gains in self.gains.values() for g in gains)

    def summary(self) -> dict:
        iterations, histogram = self.iterations, self.histogram
        total_iterations = sum(iterations)
        tokens = sum(g * c for g, c in histogram.items())
        return {
            "sentences": len(iterations),
            "mean_iterations": total_iterations / max(1, len(iterations)),
            "mean_accepted_per_iteration": tokens / max(1, total_iterations),
            "histogram": dict(sorted(histogram.items())),
        }

    def log_summary(self, name: str):
        if self.iterations:
            s = self.summary()
            logger.info(
                f"{name}: {s['sentences']} sentences, {s['mean_iterations']:.2f} iterations/sentence, "
                f"{s['mean_accepted_per_iteration']:.2f} tokens/iteration; tokens gained per iteration: {s['histogram']}"
            )
        if self.undrafted:
            logger.info(f"{name}: no draft in {self.undrafted} of {self.loop_iterations} iterations of every batch "
                        "decoded, repeats included (--draft-length measured: trials that keep timing not drafting, "
                        "and where that was faster)")
