"""Adaptive draft length (``--draft-length adaptive``; part of the default ``measured`` for
drafters whose failures persist, ``Drafter.failures_persist``): per row,

    a fully accepted draft           -> the next draft is twice as long (at most --block-size)
    a draft rejected after n tokens  -> the next draft is n + 1 tokens long
    nothing drafted (e.g. IAD found no match) -> unchanged

so a row whose drafts fail drafts one token per iteration and costs about one greedy step,
and a row whose drafts succeed is back at full length after a few iterations.  The output
is unchanged: the length only decides how much is offered to the verifier.

``--draft-length measured`` adds :class:`DraftGuard` (to adaptive or fixed length): a drafter that costs more than its
accepted tokens save (a weak drafter; any drafter at a large batch on a CPU, where a wider
block multiplies the verifier's arithmetic) is switched off for the iterations where not
drafting is measured to be faster, apart for each number of rows still decoding.
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

    Tokens per second depend on how many rows are still decoding (a batch thins out as its
    rows finish; at 32 rows a drafted block multiplies the verifier's arithmetic, at a few
    rows it costs little more than one token), so the choice is made and measured apart for
    each occupancy class: 1 row, 2-3, 4-7, 8-15, ... (:class:`MeasuredChoice` each).  At
    batch size 1 there is one class.  With ``skip_catch_up`` (a drafter with a prefix cache)
    the first drafting iteration after undrafted ones is not counted: the drafter then
    catches up with every token accepted meanwhile, a one-off cost that is not what drafting
    costs; unless the class has no drafted iteration counted yet (at 32 rows a batch often spends
    a single iteration in a class: never counted, such a class drafted in every batch).  The
    measurements live as long as the generator: one sentence at batch 1 is a few iterations.  The output is the same whichever is chosen; only the speed (and the
    iteration counts) depend on the machine's timings.  ``decay`` 0.98 remembers ~50
    iterations: tokens per drafted iteration vary from 1 to k, and with a memory of ~10
    (0.9) a run of short drafts switched a drafter paying 1.5x off in 17 % of the iterations
    on Multi30k valid (batch 1; 3 % with 0.98, mostly probes).
    """

    TRIAL_TOKEN_ROWS = 32  # the most token-rows (rows x block width) a trial of drafting verifies

    def __init__(self, probe_every: int = 16, max_interval: int = 128, decay: float = 0.98, probe_length: int = 2,
                 favour: float = 1.1, probe_share: float = 0.03, skip_catch_up: bool = False, clock=time.perf_counter):
        self.settings = dict(probe_every=probe_every, max_interval=max_interval, decay=decay,
                             probe_length=probe_length, favour=favour, probe_share=probe_share)
        self.skip_catch_up, self.clock = skip_catch_up, clock
        self.max_width = None  # this iteration's most drafted tokens a row (None: as many as the decoder drafts)
        self.classes = {}  # occupancy class -> MeasuredChoice
        self.current = None  # the class of this iteration
        self.rows = 1  # rows decoding in this iteration
        self.drafting = True
        self.catching_up = False  # this iteration drafts after undrafted ones
        self.started = 0.0

    @staticmethod
    def occupancy_class(rows: int) -> int:
        """1 row -> 1, 2-3 -> 2, 4-7 -> 3, 8-15 -> 4, ..."""
        return max(1, int(rows)).bit_length()

    def start_iteration(self, rows: int = 1) -> bool:
        """Whether this iteration (``rows`` rows still decoding) drafts; starts its clock."""
        key = self.occupancy_class(rows)
        if key not in self.classes:
            self.classes[key] = MeasuredChoice(**self.settings)
        self.current, self.rows = self.classes[key], rows
        drafting = self.current.choose()
        self.catching_up = self.skip_catch_up and drafting and not self.drafting and self.current.measured(True)
        if self.catching_up and drafting != self.current.best:  # a probe: one more iteration, counted
            self.current.extend_probe()
        self.drafting = drafting
        self.max_width = self.trial_width(rows) if drafting and not self.current.drafting_measured_best() else None
        self.started = self.clock()
        return drafting

    def trial_width(self, rows: int) -> int:
        """The most tokens a row drafts in a trial of drafting (a class's first drafted iteration, a probe): its
        block, the pending tokens included, has at most ``TRIAL_TOKEN_ROWS`` token-rows (at least one draft a row).
        At 32 rows on a CPU a block costs about its width in undrafted iterations (a Jacobi block over a whole
        output of 50 tokens: ~45), and a decoder that only wastes such blocks would pay that in a first try per
        class of rows and in every probe. A row alone drafts up to 31 tokens (a drafter's block, e.g. the demo
        drafter's 10, is not held back); where drafting pays, later iterations draft their full width."""
        return max(1, self.TRIAL_TOKEN_ROWS // max(1, rows) - 1)

    def end_iteration(self, tokens: int):
        """The iteration gained ``tokens`` (all rows together)."""
        elapsed = max(self.clock() - self.started, 1e-9)
        if not self.catching_up:
            self.current.record(self.drafting, tokens, elapsed, self.rows)


class MeasuredChoice:
    """Drafting or not, for one occupancy class: decayed sums of the tokens gained, the
    seconds spent, the iterations and the rows decoded by whole iterations of each choice;
    drafts unless not drafting yields more than ``favour`` times as many tokens per second.  It
    probes the other choice for ``probe_length`` iterations ``probe_every`` iterations after the
    best one changed, then at doubling intervals (at most ``max_interval``) while the best one
    stays, so both estimates stay current at a small cost (a choice never tried counts as
    infinitely fast, so both are tried at once).

    A probe also waits until what it is expected to lose (:meth:`probe_cost`) is at most
    ``probe_share`` of the seconds the class spent on the best choice since the last probe, however
    dear an iteration of the probed choice is: a Jacobi block over the whole output costs ~14
    undrafted iterations at 32 rows on a CPU and gains nothing, and probed every 16-128 iterations
    of its class, such probes cost the Jacobi decoders 5-20 % against greedy (``DraftGuard.trial_width``
    also narrows the blocks of trials at many rows).  The expected loss
    is discounted while the probed choice was measured on few rows (``rows / (rows + 8)``): one
    row's drafted iteration gains 1 to k + 1 tokens, so a first try that drew a short draft must not
    delay the probes that correct it.

    The sums decay per iteration of this class, not per record of their choice: an estimate
    made many iterations ago weighs little against the probe that re-measures it.  (Decayed per
    record, a run of slow drafted iterations -- cold caches -- kept a drafter paying 1.2x off
    for thousands of iterations: each probe then moved its stale estimate by one fiftieth.)
    ``favour`` 1.1 keeps a drafter within 10 % of break-even drafting: the drafted estimate is
    noisy (1 to k tokens per iteration), and without it a drafter paying ~1.25x was switched off
    in a third of the iterations (Multi30k test2016 on a 2-core AVX2 CPU; 8 % with 1.1, as fast
    as never switching it off).  The favour keeps drafting on, it does not switch it back on
    (:meth:`drafting_pays`): with it both ways, the demo drafter at ~0.85x of not drafting (Multi30k
    test2017 on a 2-core AVX-512 AMD EPYC) drafted in ~40 % of the iterations, the choice flipping
    every few of them, and ran 0.79-0.96x greedy; with the band 0.83-0.99x (9 runs side by side,
    8 of them faster).  The guard is for drafters that clearly do not pay.  The favour is
    at most drafting's gain (tokens per row and drafted iteration; not drafting gains one): drafts
    that are never accepted (gain 1) can only cost, and their tokens are not noisy; they draft only
    in probes, however close the timings."""

    CONFIDENT_ROWS = 8  # rows measured at which an expected probe loss counts half

    def __init__(self, probe_every: int, max_interval: int, decay: float, probe_length: int, favour: float,
                 probe_share: float):
        self.probe_every, self.max_interval, self.decay, self.probe_length = probe_every, max_interval, decay, probe_length
        self.favour, self.probe_share = favour, probe_share
        self.tokens = {True: 0.0, False: 0.0}  # drafting? -> decayed tokens gained
        self.seconds = {True: 0.0, False: 0.0}  # drafting? -> decayed seconds spent
        self.iterations = {True: 0.0, False: 0.0}  # drafting? -> decayed iterations recorded
        self.row_iterations = {True: 0.0, False: 0.0}  # drafting? -> decayed rows decoded, summed over iterations
        self.rows_measured = {True: 0, False: 0}  # drafting? -> rows decoded, summed over every record
        self.recorded_at = {True: 0, False: 0}  # drafting? -> the iteration of its last record
        self.iteration = 0
        self.best = True
        self.interval = probe_every
        self.next_probe = probe_every
        self.since_probe = 0.0  # seconds of the best choice recorded since the last probe (or change of it)
        self.probe_left = 0  # iterations left in the current probe
        self.extended = False  # the current probe was extended

    def measured(self, drafting: bool) -> bool:
        """Whether an iteration of that choice was recorded."""
        return self.rows_measured[drafting] > 0

    def rate(self, drafting: bool) -> float:
        """Tokens per second of that choice (inf while it was never measured)."""
        seconds = self.seconds[drafting]
        return self.tokens[drafting] / seconds if seconds > 0 else math.inf

    def gain(self) -> float:
        """Tokens per row and drafted iteration (inf while drafting was never measured)."""
        rows = self.row_iterations[True]
        return self.tokens[True] / rows if rows > 0 else math.inf

    def probe_cost(self, drafting: bool) -> float:
        """Seconds a probe of that choice is expected to lose against the other: the seconds of its
        ``probe_length`` iterations times the share of them that gains nothing at the other's rate,
        discounted while measured on few rows (0 while either choice was never measured)."""
        mine, other = self.rate(drafting), self.rate(not drafting)
        if math.isinf(mine) or math.isinf(other) or other <= 0:
            return 0.0
        rows = self.rows_measured[drafting]
        seconds = self.probe_length * self.seconds[drafting] / self.iterations[drafting]
        return seconds * max(0.0, 1 - mine / other) * rows / (rows + self.CONFIDENT_ROWS)

    def share(self) -> float:
        """The share of the time a probe may lose: ``probe_share``, half of it while drafting gains nothing (one
        token a row per drafted iteration: no draft accepted), where a probe only checks that nothing changed."""
        return self.probe_share if self.gain() > 1 else self.probe_share / 2

    def drafting_measured_best(self) -> bool:
        """Whether drafting is the best choice on a measurement of it (not a first try, not a probe)."""
        return self.best and self.measured(True)

    def drafting_pays(self) -> bool:
        """Drafting stays the best choice while its rate times the favour is at least not drafting's, and becomes
        it again only when its rate alone is: a band, so that a drafter near break-even is not switched on and
        off by the drift of the estimates (undrafted steps cost more in long sentences, for dozens of iterations)."""
        gain = self.gain()
        favour = min(self.favour, gain) if self.best else 1.0
        return gain > 1 and self.rate(True) * favour >= self.rate(False)

    def choose(self) -> bool:
        """Whether this iteration drafts."""
        self.iteration += 1
        best = self.drafting_pays()
        if best != self.best:
            self.best, self.interval, self.probe_left, self.since_probe = best, self.probe_every, 0, 0.0
            self.next_probe = self.iteration + self.interval
        if self.iteration >= self.next_probe and self.since_probe * self.share() >= self.probe_cost(not best):
            self.interval = min(2 * self.interval, self.max_interval)
            self.next_probe = self.iteration + self.interval
            self.probe_left, self.since_probe, self.extended = self.probe_length, 0.0, False
        probe = self.probe_left > 0
        self.probe_left -= probe
        return best != probe

    def extend_probe(self):
        """The probe going on lasts one iteration more (its last one was not counted), once."""
        self.probe_left += not self.extended
        self.extended = True

    def record(self, drafting: bool, tokens: int, seconds: float, rows: int = 1):
        """This iteration (the last one chosen, ``rows`` rows) gained ``tokens`` in ``seconds``."""
        kept = self.decay ** (self.iteration - self.recorded_at[drafting])
        self.recorded_at[drafting] = self.iteration
        self.tokens[drafting] = kept * self.tokens[drafting] + tokens
        self.seconds[drafting] = kept * self.seconds[drafting] + seconds
        self.iterations[drafting] = kept * self.iterations[drafting] + 1
        self.row_iterations[drafting] = kept * self.row_iterations[drafting] + rows
        self.rows_measured[drafting] += rows
        if drafting == self.best:
            self.since_probe += seconds
