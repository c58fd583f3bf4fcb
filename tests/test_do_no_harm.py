"""Do no harm: a drafter that does not pay costs about what the plugin's greedy decoder costs.

Speed lives in the benchmarks; here the work is counted.  The guard (``--draft-length measured``)
reads a simulated clock that advances with the work done: verifier token-rows, drafter calls.
"""
import pytest
import torch
from fairseq.sequence_generator import SequenceGenerator

from drafter_helpers import build_drafter, build_verifier, random_batch
from fairseq_plugins.decoding.core import SpeculativeConfig, SpeculativeGenerator
from fairseq_plugins.decoding.draft_length import DraftGuard
from fairseq_plugins.decoding.drafters import BatchStart, Drafter
from fairseq_plugins.decoding.incremental import VerifierCache
from fairseq_plugins.decoding.specdec import BlockDrafter
from tiny_models import build_transformer, make_batch, make_dictionary

DICT = make_dictionary(14)
SOURCES = [5, 9, 3, 7, 4, 8, 6, 2]


class WrongDrafter(Drafter):
    """Drafts, at every position, a token other than the verifier's greedy one (``references``:
    each row's greedy output), so that nothing it drafts is ever accepted."""

    def __init__(self, references):
        self.references = references
        self.calls = 0

    def start(self, batch):
        self.rows = torch.arange(batch.src_tokens.size(0))

    def propose(self, tokens, lengths, k):
        self.calls += 1
        low, vocab = DICT.nspecial, len(DICT)
        drafts = torch.full((tokens.size(0), k), low)
        for i, row in enumerate(self.rows.tolist()):
            greedy = self.references[row][int(lengths[i]) - 1:][:k]
            drafts[i, :len(greedy)] = (greedy - low + 1) % (vocab - low) + low  # never the greedy token
        return drafts

    def keep_rows(self, rows):
        self.rows = self.rows[rows]


def counted_generator(model, drafter, cfg, now, work):
    """A generator whose verifier blocks advance the clock ``now`` by one second per token-row and count
    them in ``work["verifier"]``; with ``cfg.measured``, its guard reads that clock."""
    class CountingCache(VerifierCache):
        def forward_block(self, tokens):
            now[0] += tokens.numel()
            work["verifier"] += tokens.numel()
            return super().forward_block(tokens)

    generator = SpeculativeGenerator(model, DICT, drafter, cfg)
    generator.cache_factory = CountingCache
    if cfg.measured:
        generator.guard = DraftGuard(clock=lambda: now[0])
    return generator


@pytest.mark.parametrize("adaptive", [False, True])
def test_a_drafter_that_is_never_right_costs_about_greedy(adaptive):
    """30 batches of 8 rows: drafts never accepted (a drafted block of 5 costs 5 token-rows a row and
    gains 1 token) end up costing at most 10 % more verifier work than drafting nothing, and the
    drafter is asked a few times per occupancy class, not in every batch (trials of drafting are
    narrower at more rows, so they are afforded a little more often than whole blocks would be)."""
    model = build_transformer(DICT, seed=3, eos_boost=1.0)
    batch = make_batch(DICT, SOURCES, seed=2)
    reference = SequenceGenerator([model], DICT, beam_size=1, max_len_b=20).generate([model], batch)
    references = [hypos[0]["tokens"] for hypos in reference]
    costs = {}
    for name in ("greedy", "never right"):
        now, work = [0.0], {"verifier": 0}
        drafter = WrongDrafter(references)
        block_size = 0 if name == "greedy" else 4
        cfg = SpeculativeConfig(block_size=block_size, adaptive=adaptive, measured=block_size > 0, max_len_b=20)
        generator = counted_generator(model, drafter, cfg, now, work)
        for _ in range(30):
            for ours, ref in zip(generator.generate([model], batch), reference):
                assert ours[0]["tokens"].tolist() == ref[0]["tokens"].tolist()
        costs[name] = work["verifier"], drafter.calls, generator.guard
    (greedy_work, _, _), (work, calls, guard) = costs["greedy"], costs["never right"]
    assert greedy_work <= work <= 1.1 * greedy_work
    assert calls <= 4 * len(guard.classes)


def test_trials_of_drafting_are_narrow_at_many_rows():
    """A class's first drafted iteration and the probes after it verify at most 32 drafted token-rows: never
    right, a block of 16 drafts at 16 rows would cost ~17 undrafted iterations each time (a Jacobi block over
    a whole output at 32 rows cost 45 of them). Every block is counted, first tries included."""
    model = build_transformer(DICT, seed=3, eos_boost=1.0)
    batch = make_batch(DICT, SOURCES + SOURCES[::-1], seed=2)  # 16 rows
    reference = SequenceGenerator([model], DICT, beam_size=1, max_len_b=20).generate([model], batch)
    blocks = []  # (rows, drafted tokens a row) of every verified block

    class RecordingCache(VerifierCache):
        def forward_block(self, tokens):
            blocks.append((tokens.size(0), tokens.size(1) - 1))
            return super().forward_block(tokens)

    cfg = SpeculativeConfig(block_size=16, adaptive=False, measured=True, max_len_b=20)
    generator = SpeculativeGenerator(model, DICT, WrongDrafter([hypos[0]["tokens"] for hypos in reference]), cfg)
    generator.cache_factory = RecordingCache
    for _ in range(5):
        for ours, ref in zip(generator.generate([model], batch), reference):
            assert ours[0]["tokens"].tolist() == ref[0]["tokens"].tolist()
    drafted = [(rows, width) for rows, width in blocks if width > 0]
    assert drafted and max(rows for rows, _ in drafted) == 16, drafted  # the first try at 16 rows
    assert all(rows * width <= 32 for rows, width in drafted), drafted  # DraftGuard.TRIAL_TOKEN_ROWS
    assert max(width for rows, width in drafted if rows == 1) > 4  # a row alone is not held back


class NeverDraft:
    """A guard that always chooses not to draft."""

    max_width = None

    def start_iteration(self, rows=1):
        return False

    def end_iteration(self, tokens):
        pass


def test_block_drafter_costs_nothing_in_a_batch_it_never_drafts():
    """The drafter's encoder output and cache are made at a batch's first proposal: the first batch
    builds them at once (its one-off costs), a later batch without drafts never does."""
    verifier = build_verifier(DICT, seed=1)
    adapter = BlockDrafter(build_drafter(DICT, seed=2))
    batch = make_batch(DICT, [4, 7, 2], seed=3)
    generator = SpeculativeGenerator(verifier, DICT, adapter, SpeculativeConfig(block_size=3, measured=True, max_len_b=12))
    generator.guard = NeverDraft()
    greedy = SequenceGenerator([verifier], DICT, beam_size=1, max_len_b=12).generate([verifier], batch)
    for ours, ref in zip(generator.generate([verifier], batch), greedy):
        assert ours[0]["tokens"].tolist() == ref[0]["tokens"].tolist()
    assert adapter.cache is not None  # the first batch
    for ours, ref in zip(generator.generate([verifier], batch), greedy):
        assert ours[0]["tokens"].tolist() == ref[0]["tokens"].tolist()
    assert adapter.cache is None and adapter.encoder_out is None


@pytest.mark.parametrize("cached", [True, False])
def test_block_drafter_prepared_after_rows_left_drafts_as_if_prepared_at_once(cached):
    """A drafter that proposes first after rows left the batch proposes what one prepared at the start
    (the whole batch encoded, then its rows kept) proposes: same drafts, same scores."""
    drafter = build_drafter(DICT, seed=4)
    src, src_lengths, prefix, prefix_lengths = random_batch(DICT, [5, 3, 6, 4], [3, 2, 4, 1], seed=5)
    start = BatchStart(src, src_lengths, 20, None)
    rows = torch.tensor([2, 0, 3])
    at_once = BlockDrafter(drafter, cached=cached)
    at_once.start(start)  # its first batch: prepared in start
    assert at_once.batch is None
    late = BlockDrafter(drafter, cached=cached)
    late.start(start)
    late.start(start)  # a later batch: prepared at its first proposal
    assert late.batch is not None
    for adapter in (at_once, late):
        adapter.keep_rows(torch.tensor([0, 2, 3]))
        adapter.keep_rows(torch.tensor([1, 0, 2]))  # rows 2, 0, 3 of the batch are left
    drafts = [adapter.propose(prefix[rows], prefix_lengths[rows], 3) for adapter in (at_once, late)]
    assert torch.equal(drafts[0].tokens, drafts[1].tokens)
    assert torch.equal(drafts[0].scores, drafts[1].scores)


def simulate(rows_per_iteration, cost, **guard_options):
    """The guard's choices on a simulated clock; ``cost(rows, drafting)`` -> (seconds, tokens)."""
    now, choices = [0.0], []
    guard = DraftGuard(clock=lambda: now[0], **guard_options)
    for rows in rows_per_iteration:
        drafting = guard.start_iteration(rows)
        seconds, tokens = cost(rows, drafting)
        choices.append(drafting)
        now[0] += seconds
        guard.end_iteration(tokens)
    return choices


def test_drafts_that_gain_nothing_are_never_favoured():
    """Drafted iterations that gain one token per row, as not drafting does, are not chosen even when
    timed a little faster (timing noise): they draft only in probes."""
    choices = simulate([1] * 1000, lambda rows, drafting: (0.98 if drafting else 1.0, 1))
    assert sum(choices) < 0.05 * len(choices)


def test_probes_of_a_dear_drafter_lose_a_small_share_of_the_time():
    """A drafted iteration costing 14 undrafted ones and gaining 1.2 tokens per row (a Jacobi block
    over the whole output at 32 rows): the probes that re-measure it take a few percent of the time,
    not a probe every 128 iterations (~18 %)."""
    seconds = {True: 0.0, False: 0.0}

    def cost(rows, drafting):
        seconds[drafting] += 14.0 if drafting else 1.0
        return (14.0 if drafting else 1.0), (1.2 * rows if drafting else rows)

    choices = simulate([32] * 5000, cost)
    assert 2 <= sum(choices) and seconds[True] < 0.05 * (seconds[True] + seconds[False])


def test_a_class_met_one_iteration_at_a_time_is_measured():
    """Batches thin out fast: each starts with 12 rows (class 4) for one iteration, then 3 rows for 20.
    A drafter with a prefix cache catches up after undrafted iterations, which the guard does not
    count; the first drafted iteration of a class counts all the same, else class 4 drafts in every
    batch (194 of 200 here before it counted)."""
    rows = [3] * 20 + ([12] + [3] * 20) * 200

    def cost(rows, drafting):  # drafting costs 10x an iteration and gains 1.5 tokens a row
        return (10.0 if drafting else 1.0) * rows, (1.5 if drafting else 1) * rows

    choices = simulate(rows, cost, skip_catch_up=True)
    in_class_4 = [drafting for n, drafting in zip(rows, choices) if n == 12]
    assert sum(in_class_4) < 0.1 * len(in_class_4)


def test_a_drafter_near_break_even_is_not_switched_on_and_off():
    """Drafting at 0.88x the tokens per second of not drafting, while every iteration's cost drifts in runs of 25
    (long and short sentences): drafting is switched back on only when measured faster, not within the favour that
    keeps it on, so the guard settles on not drafting (it drafted in ~80 % of the iterations, flipping ~600 times,
    when the favour switched it on too)."""
    iteration, seconds, tokens = [0], [0.0], [0]

    def cost(rows, drafting):
        drift = 1.12 if (iteration[0] // 25) % 2 else 0.9
        iteration[0] += 1
        spent, gained = ((4 / 0.88) * drift, 4) if drafting else (drift, 1)
        seconds[0] += spent
        tokens[0] += gained
        return spent, gained

    choices = simulate([1] * 3000, cost, skip_catch_up=True)
    switches = sum(a != b for a, b in zip(choices, choices[1:]))
    assert sum(choices) < 0.15 * len(choices) and switches < 150, (sum(choices), switches)
    assert tokens[0] / seconds[0] > 0.95  # not drafting gains 1 token a second
