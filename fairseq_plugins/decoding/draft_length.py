"""Adaptive draft length (``--draft-length adaptive``, the default): per row,

    a fully accepted draft           -> the next draft is twice as long (at most --block-size)
    a draft rejected after n tokens  -> the next draft is n + 1 tokens long
    nothing drafted (e.g. IAD found no match) -> unchanged

so a row whose drafts fail drafts one token per iteration and costs about one greedy step,
and a row whose drafts succeed is back at full length after a few iterations.  The output
is unchanged: the length only decides how much is offered to the verifier.

``--draft-length measured`` adds :class:`DraftGuard`: a drafter that costs more than its
accepted tokens save (a weak drafter; any drafter at a large batch on a CPU, where a wider
block multiplies the verifier's arithmetic) is switched off for the iterations where not
drafting is measured to be faster.
"""
import math
import time

import torch
from torch import Tensor


def initial_lengths(batch_size: int, k_max: int, device) -> Tensor:
    """(B,) every row starts with the longest draft."""
    return torch.full((batch_size,), k_max, dtype=torch.long, device=device)


def next_lengths(k: Tensor, offered: Tensor, accepted: Tensor, k_max: int) -> Tensor:
    """k, offered, accepted: (B,) draft length asked, drafted tokens offered (non-pad,
    within the row's length), drafted tokens accepted -> (B,) next draft lengths."""
    grown = torch.clamp(k * 2, max=k_max)
    shrunk = accepted + 1
    adapted = torch.where(accepted >= offered, grown, shrunk)
    return torch.where(offered > 0, adapted, k)


class DraftGuard:
    """``--draft-length measured``: adaptive length, and a measured choice, per iteration,
    between drafting and not drafting (the verifier alone, one token per row).

    For both choices it keeps decayed sums of the tokens gained and the seconds spent by
    whole iterations, and drafts while drafting yields at least as many tokens per second.
    It probes the other choice for ``probe_length`` iterations ``probe_every`` iterations
    after the best one changed, then at doubling intervals (at most ``max_interval``) while
    the best one stays, so both estimates stay current at a small cost (a choice never
    tried counts as infinitely fast, so both are tried at once).  With ``skip_catch_up``
    (a drafter with a prefix cache) the first drafting iteration after undrafted ones is not
    counted: the drafter then catches up with every token accepted meanwhile, a one-off
    cost that is not what drafting costs.
    The sums live as long as the generator: one sentence at batch 1 is a few iterations.
    The output is the same whichever is chosen; only the speed (and the iteration
    counts) depend on the machine's timings.
    """

    def __init__(self, probe_every: int = 16, max_interval: int = 128, decay: float = 0.9, probe_length: int = 2,
                 skip_catch_up: bool = False, clock=time.perf_counter):
        self.probe_every, self.max_interval, self.decay, self.clock = probe_every, max_interval, decay, clock
        self.probe_length, self.skip_catch_up = probe_length, skip_catch_up
        self.tokens = {True: 0.0, False: 0.0}  # drafting? -> decayed tokens gained
        self.seconds = {True: 0.0, False: 0.0}  # drafting? -> decayed seconds spent
        self.iteration = 0
        self.best = True
        self.interval = probe_every
        self.next_probe = probe_every
        self.probe_left = 0  # iterations left in the current probe
        self.drafting = True
        self.catching_up = False  # this iteration drafts after undrafted ones
        self.started = 0.0

    def rate(self, drafting: bool) -> float:
        """Tokens per second of that choice (inf while it was never measured)."""
        seconds = self.seconds[drafting]
        return self.tokens[drafting] / seconds if seconds > 0 else math.inf

    def start_iteration(self) -> bool:
        """Whether this iteration drafts; starts its clock."""
        self.iteration += 1
        best = self.rate(True) >= self.rate(False)
        if best != self.best:
            self.best, self.interval, self.probe_left = best, self.probe_every, 0
            self.next_probe = self.iteration + self.interval
        if self.iteration >= self.next_probe:
            self.interval = min(2 * self.interval, self.max_interval)
            self.next_probe = self.iteration + self.interval
            self.probe_left = self.probe_length
        probe = self.probe_left > 0
        self.probe_left -= probe
        drafting = best != probe
        self.catching_up = self.skip_catch_up and drafting and not self.drafting
        self.drafting = drafting
        self.started = self.clock()
        return self.drafting

    def end_iteration(self, tokens: int):
        """The iteration gained ``tokens`` (all rows together)."""
        elapsed = max(self.clock() - self.started, 1e-9)
        if self.catching_up:
            return
        choice = self.drafting
        self.tokens[choice] = self.decay * self.tokens[choice] + tokens
        self.seconds[choice] = self.decay * self.seconds[choice] + elapsed
