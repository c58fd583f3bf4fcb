"""Parity: the speculative loop with greedy acceptance == fairseq's --beam 1, token for token.

Random tiny verifiers (double precision, so that a one-pass block forward and fairseq's
token-by-token forward cannot round differently), random drafters, ragged batches.
"""
import itertools
import random
from typing import List

import pytest
import torch
from fairseq.sequence_generator import SequenceGenerator
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fairseq_plugins.decoding.core import SpeculativeConfig, SpeculativeGenerator
from fairseq_plugins.decoding.draft_length import DraftGuard
from fairseq_plugins.decoding.drafters import Drafter
from tiny_models import build_transformer, make_batch, make_dictionary

DICT = make_dictionary(12)


class RandomDrafter(Drafter):
    """Random tokens, with a chance of copying the verifier's last choices (to get accepts)."""

    def __init__(self, seed, vocab):
        self.g = torch.Generator().manual_seed(seed)
        self.vocab = vocab

    def propose(self, tokens, lengths, k):
        return torch.randint(DICT.nspecial - 2, self.vocab, (tokens.size(0), k), generator=self.g)


class CountingDrafter(RandomDrafter):
    def __init__(self, seed, vocab):
        super().__init__(seed, vocab)
        self.calls = 0

    def propose(self, tokens, lengths, k):
        self.calls += 1
        return super().propose(tokens, lengths, k)


class OracleDrafter(Drafter):
    """Drafts the reference output from the current position (a perfect drafter)."""

    def __init__(self, references):
        self.references = references

    def start(self, batch):
        self.rows = torch.arange(batch.src_tokens.size(0))

    def propose(self, tokens, lengths, k):
        drafts = torch.full((tokens.size(0), k), DICT.pad())
        for i, row in enumerate(self.rows.tolist()):
            segment = self.references[row][int(lengths[i]) - 1:][:k]
            drafts[i, : len(segment)] = segment
        return drafts

    def keep_rows(self, rows):
        self.rows = self.rows[rows]


def greedy(model, batch, **length_options):
    return SequenceGenerator([model], DICT, beam_size=1, **length_options).generate([model], batch)


def assert_same_hypotheses(reference, ours):
    assert len(reference) == len(ours)
    for ref, out in zip(reference, ours):
        assert out[0]["tokens"].tolist() == ref[0]["tokens"].tolist()
        torch.testing.assert_close(out[0]["positional_scores"], ref[0]["positional_scores"])
        torch.testing.assert_close(torch.as_tensor(out[0]["score"]), torch.as_tensor(ref[0]["score"]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    src_lengths=st.lists(st.integers(1, 12), min_size=1, max_size=5),
    block_size=st.sampled_from([1, 2, 3, 5, 8, 40]),
    learned_pos=st.booleans(),
    normalize_before=st.booleans(),
    eos_boost=st.sampled_from([0.0, 1.0, 2.5]),
    max_len_a=st.sampled_from([0.0, 1.2]),
    max_len_b=st.integers(1, 16),
    min_len=st.integers(1, 3),
    length=st.sampled_from(["fixed", "adaptive", "measured"]),
)
def test_random_drafter_gives_greedy_output(seed, src_lengths, block_size, learned_pos, normalize_before,
                                            eos_boost, max_len_a, max_len_b, min_len, length):
    assume(min_len <= int(max_len_a * (max(src_lengths) + 1) + max_len_b))
    model = build_transformer(DICT, seed=seed % 50, learned_pos=learned_pos, normalize_before=normalize_before,
                              eos_boost=eos_boost)
    batch = make_batch(DICT, src_lengths, seed=seed)
    lengths = dict(max_len_a=max_len_a, max_len_b=max_len_b, min_len=min_len)
    reference = greedy(model, batch, **lengths)
    cfg = SpeculativeConfig(block_size=block_size, adaptive=length != "fixed", measured=length == "measured", **lengths)
    generator = SpeculativeGenerator(model, DICT, RandomDrafter(seed, len(DICT)), cfg)
    if length == "measured":  # random timings: drafting and not drafting in random turns
        generator.guard = DraftGuard(probe_every=3, clock=random_clock(seed))
    assert_same_hypotheses(reference, generator.generate([model], batch))


def random_clock(seed):
    """A clock whose ticks have random lengths."""
    ticks = itertools.accumulate(random.Random(seed).uniform(0.001, 1.0) for _ in itertools.count())
    return lambda: next(ticks)


def test_measured_length_skips_a_drafter_that_does_not_pay():
    """A drafter measured to be slow is skipped; the output stays greedy's.  A probe waits until what it
    is expected to lose (~100 s a drafted iteration) is 3 % of the time spent not drafting since the last
    one (here none): each occupancy class drafts in its first try only."""
    model = build_transformer(DICT, seed=3, eos_boost=0.5)
    batch = make_batch(DICT, [6, 9, 4], seed=1)
    drafter = CountingDrafter(seed=2, vocab=len(DICT))
    cfg = SpeculativeConfig(block_size=4, measured=True, adaptive=True, max_len_b=30)
    generator = SpeculativeGenerator(model, DICT, drafter, cfg)
    now = [0.0]

    def clock():
        return now[0]

    generator.guard = DraftGuard(probe_every=8, clock=clock)
    original = drafter.propose

    def slow_propose(tokens, lengths, k):
        now[0] += 100.0  # drafting costs 100 s, not drafting ~0
        return original(tokens, lengths, k)

    drafter.propose = slow_propose
    for _ in range(3):
        assert_same_hypotheses(greedy(model, batch, max_len_b=30), generator.generate([model], batch))
    classes = generator.guard.classes  # 3 rows (class 2), then maybe 2 (class 2) and 1 (class 1)
    iterations = sum(choice.iteration for choice in classes.values())
    assert 2 in classes and set(classes) <= {1, 2}
    assert 1 <= drafter.calls <= len(classes)  # each class's first try (none when a row's room was used up)
    assert generator.stats.loop_iterations == iterations
    assert drafter.calls <= iterations - generator.stats.undrafted  # propose only in drafting iterations (not all: no room left)


@pytest.mark.parametrize("block_size", [1, 3, 7, 64])
def test_perfect_drafter_needs_few_iterations(block_size):
    model = build_transformer(DICT, seed=3, eos_boost=1.0)
    batch = make_batch(DICT, [3, 9, 1, 6], seed=1)
    reference = greedy(model, batch, max_len_b=20)
    drafter = OracleDrafter([hypos[0]["tokens"] for hypos in reference])
    ours = SpeculativeGenerator(model, DICT, drafter, SpeculativeConfig(block_size=block_size, max_len_b=20)).generate([model], batch)
    assert_same_hypotheses(reference, ours)
    for ref, out in zip(reference, ours):
        n = len(ref[0]["tokens"])
        assert out[0]["steps"] == -(-n // (block_size + 1))  # ceil: k drafts + 1 verifier token each
        assert sum(out[0]["accepted_per_iteration"]) == n


def record_block_widths(generator) -> List[int]:
    """The width of every block the generator's verifier caches will run, in order (a list it fills)."""
    from fairseq_plugins.decoding.incremental import VerifierCache

    widths = []

    class CountingCache(VerifierCache):
        def forward_block(self, tokens):
            widths.append(tokens.size(1))
            return super().forward_block(tokens)

    generator.cache_factory = CountingCache
    return widths


def test_verifier_cache_comes_from_the_generators_factory():
    """``cache_factory`` (what ``--cuda-graphs`` sets) makes every batch's verifier cache."""
    model = build_transformer(DICT, seed=4, eos_boost=1.0)
    batch = make_batch(DICT, [5, 2, 7], seed=3)
    generator = SpeculativeGenerator(model, DICT, RandomDrafter(1, len(DICT)), SpeculativeConfig(block_size=3, max_len_b=15))
    blocks = record_block_widths(generator)
    assert_same_hypotheses(greedy(model, batch, max_len_b=15), generator.generate([model], batch))
    assert len(blocks) > 0 and max(blocks) == 4  # the pending token + 3 drafts


def test_random_drafter_never_needs_more_iterations_than_greedy_steps():
    model = build_transformer(DICT, seed=5, eos_boost=1.0)
    batch = make_batch(DICT, [4, 8, 2], seed=2)
    ours = SpeculativeGenerator(model, DICT, RandomDrafter(0, len(DICT)), SpeculativeConfig(block_size=4, max_len_b=12)).generate([model], batch)
    for out in ours:
        assert 1 <= out[0]["steps"] <= len(out[0]["tokens"])
        assert all(g >= 1 for g in out[0]["accepted_per_iteration"])


def test_float32_model_matches_too():
    """fp32 (what users run): the block forward may round differently; on these seeds it does not."""
    for seed in range(3):
        model = build_transformer(DICT, seed=seed, eos_boost=1.0, dtype=torch.float32)
        batch = make_batch(DICT, [5, 2, 9], seed=seed)
        reference = greedy(model, batch, max_len_b=15)
        ours = SpeculativeGenerator(model, DICT, RandomDrafter(seed, len(DICT)), SpeculativeConfig(block_size=4, max_len_b=15)).generate([model], batch)
        for ref, out in zip(reference, ours):
            assert out[0]["tokens"].tolist() == ref[0]["tokens"].tolist()


def test_limits_turn_nan_into_minus_inf_like_fairseq():
    """fairseq's generator sets NaN log-probs to -inf before choosing; +-inf stay."""
    import math

    from fairseq_plugins.decoding.acceptance import GenerationLimits, apply_limits

    lprobs = torch.tensor([[[float("nan"), -1.0, float("inf"), -float("inf"), -2.0, float("nan")]]])
    limits = GenerationLimits(pad=1, unk=3, eos=2, min_len=0, max_len=100)
    out = apply_limits(lprobs, torch.zeros(1, 1, dtype=torch.long), limits)
    assert out[0, 0].tolist() == [-math.inf, -math.inf, math.inf, -math.inf, -2.0, -math.inf]


def simulate_guard(iterations: int, cost, **guard_options) -> List[bool]:
    """The guard's choices over ``iterations`` one-row iterations on a simulated clock;
    ``cost(i, drafting, earlier_choices)`` -> (seconds iteration i takes, tokens it gains)."""
    now, choices = [0.0], []
    guard = DraftGuard(clock=lambda: now[0], **guard_options)
    for i in range(iterations):
        drafting = guard.start_iteration()
        seconds, tokens = cost(i, drafting, choices)
        choices.append(drafting)
        now[0] += seconds
        guard.end_iteration(tokens)
    return choices


@pytest.mark.parametrize("draft_rate, plain_rate, drafts_mostly", [(3.0, 1.0, True), (0.5, 1.0, False)])
def test_draft_guard_keeps_the_faster_choice_and_probes_the_other(draft_rate, plain_rate, drafts_mostly):
    # every iteration takes 1 s and gains its choice's rate in tokens
    choices = simulate_guard(100, lambda i, drafting, _: (1.0, draft_rate if drafting else plain_rate), probe_every=10)
    assert choices[:2] == [True, False]  # both tried first
    start = 2 if drafts_mostly else 4  # drafting again after the probe of not drafting: one more to count
    probed = [i for i, c in enumerate(choices[start:], start=start) if c != drafts_mostly]
    probes = [i for i in probed if i - 1 not in probed]  # probes last 2 iterations
    assert all(i + 1 in probed for i in probes)
    assert len(probes) >= 2 and all(b - a >= 10 for a, b in zip(probes, probes[1:]))
    gaps = [b - a for a, b in zip(probes, probes[1:])]
    assert gaps == sorted(gaps) and gaps[-1] > gaps[0]  # probed at growing intervals while the best one stays


def test_draft_guard_does_not_count_the_drafter_catching_up():
    """The first drafting iteration after undrafted ones (a cached drafter feeds every token
    accepted meanwhile) is a one-off cost: it must not make drafting look slow.  Only for
    drafters with a prefix cache (a Jacobi guess after a pause is simply worse: it counts)."""
    from drafter_helpers import build_drafter, make_dictionary
    from fairseq_plugins.decoding.specdec import BlockDrafter

    assert not Drafter.has_prefix_cache and BlockDrafter(build_drafter(make_dictionary(14), seed=0)).has_prefix_cache

    def cost(i, drafting, earlier):  # catching up is slow; drafting gains 2 tokens per second
        catching_up = drafting and bool(earlier) and not earlier[-1]
        return (100.0 if catching_up else 1.0), (2 if drafting else 1)

    choices = simulate_guard(200, cost, probe_every=4, skip_catch_up=True)
    assert sum(choices[100:]) > 90  # drafting is the best choice once measured without its catch-up


def test_draft_guard_keeps_a_drafter_that_pays_on_average():
    """Tokens per drafted iteration vary a lot (1-8, mean 2.5, as on Multi30k valid): a run of
    short ones must not switch off a drafter that pays 1.5x (with the earlier, shorter memory,
    decay 0.9: off in 7 % of these iterations, 17 % on Multi30k valid; now only the probes, 2 %)."""
    rng = random.Random(0)
    gains = [1] * 35 + [2] * 30 + [3] * 15 + [4] * 7 + [5] * 4 + [6] * 3 + [8] * 6  # mean 2.54 tokens

    def cost(i, drafting, _):  # with timing noise
        seconds = (1.7 if drafting else 1.0) * rng.uniform(0.8, 1.2)
        return seconds, (rng.choice(gains) if drafting else 1)

    choices = simulate_guard(3000, cost)
    assert sum(choices) > 0.97 * len(choices)


@pytest.mark.parametrize("seed", range(8))
def test_draft_guard_switches_a_paying_drafter_back_on_after_a_slow_spell(seed):
    """60 drafted iterations at 3x their time (caches cold after another program ran) switch a
    drafter paying 1.22x off; the probes must switch it back on soon.  (With sums decayed per
    record of their choice, 3 of these 8 seeds stayed off for the 1,500 iterations after.)"""
    rng = random.Random(seed)
    gains = [1] * 20 + [2] * 25 + [3] * 20 + [4] * 15 + [5] * 8 + [6] * 6 + [8] * 6  # mean 3.04 tokens

    def cost(i, drafting, _):
        slow = 3.0 if 200 <= i < 260 else 1.0
        seconds = (2.0 if drafting else 0.8) * slow * rng.uniform(0.9, 1.1)
        return seconds, (rng.choice(gains) if drafting else 1)

    choices = simulate_guard(2000, cost, skip_catch_up=True)
    assert sum(choices[500:]) > 0.9 * len(choices[500:])


@pytest.mark.parametrize("draft_rate, drafts_mostly", [(0.95, True), (0.8, False)])
def test_draft_guard_keeps_a_drafter_near_break_even(draft_rate, drafts_mostly):
    """Within 10 % of break-even a drafter keeps drafting (its estimate is too noisy to tell);
    one gaining 0.8x the tokens per second of not drafting is switched off."""
    # undrafted: 1 token in 1 s; drafted: 2 or 3 tokens in 2.5 / draft_rate s
    choices = simulate_guard(1000, lambda i, drafting, _: (2.5 / draft_rate, 2 + i % 2) if drafting else (1.0, 1))
    tail = choices[100:]
    assert (sum(tail) > 0.9 * len(tail)) if drafts_mostly else (sum(tail) < 0.1 * len(tail))


def test_draft_guard_chooses_apart_for_each_number_of_rows():
    """Drafting pays with few rows and not with many (a wide block multiplies the verifier's
    work): the guard drafts at 1-3 rows and not at 16-31, whatever order the classes come in."""
    now, choices = [0.0], {2: [], 5: []}
    guard = DraftGuard(probe_every=8, clock=lambda: now[0])
    for i in range(400):
        rows = 3 if (i // 7) % 2 else 20  # a batch thinning out and new batches: classes interleave
        drafting = guard.start_iteration(rows)
        choices[DraftGuard.occupancy_class(rows)].append(drafting)
        tokens = rows * (3 if drafting else 1)  # 3 tokens per row drafted, 1 without
        now[0] += (1.0 + rows * (0.5 if drafting else 0.01)) if rows > 4 else 1.0  # drafting is costly at 20 rows
        guard.end_iteration(tokens)
    assert sorted(guard.classes) == [2, 5]
    assert sum(choices[2][20:]) > 0.9 * len(choices[2][20:])  # 3 rows: drafting (3 tokens per second vs 1)
    assert sum(choices[5][20:]) < 0.1 * len(choices[5][20:])  # 20 rows: not drafting (60 / 11 < 20 / 1.2)


@pytest.mark.parametrize("beta, tau, guarded", [(1, 0.0, True), (3, 1.0, False), (1, 0.5, False)])
def test_measured_length_is_for_lossless_acceptance_only(beta, tau, guarded):
    """SpecDec++'s output depends on the drafts: timings must not decide them (no guard)."""
    from types import SimpleNamespace

    from fairseq_plugins.decoding.builder import build_speculative
    from fairseq_plugins.decoding.options import DraftLengthOptions

    model = build_transformer(DICT, seed=0)
    task, args = SimpleNamespace(target_dictionary=DICT), SimpleNamespace(beam=1, max_len_a=0.0, max_len_b=10)
    assert DraftLengthOptions().draft_length == "measured"
    generator = build_speculative(task, [model], args, "specdec", RandomDrafter(0, len(DICT)), DraftLengthOptions(),
                                  3, beta, tau)
    assert (generator.guard is not None) == guarded and generator.cfg.adaptive


@pytest.mark.parametrize("length, persist, adaptive, guarded", [
    ("measured", True, True, True), ("measured", False, False, True),
    ("adaptive", False, True, False), ("fixed", True, False, False)])
def test_measured_length_shrinks_drafts_only_where_failures_persist(length, persist, adaptive, guarded):
    """The default (measured) drafts the whole block with a trained drafter (failures_persist
    False: the block drafter), adaptive length with IAD and the Jacobi family."""
    from types import SimpleNamespace

    from fairseq_plugins.decoding.builder import build_speculative
    from fairseq_plugins.decoding.iad import SourceCopyDrafter
    from fairseq_plugins.decoding.options import DraftLengthOptions
    from fairseq_plugins.decoding.specdec import BlockDrafter

    assert not BlockDrafter.failures_persist and SourceCopyDrafter.failures_persist
    drafter = RandomDrafter(0, len(DICT))
    drafter.failures_persist = persist
    task, args = SimpleNamespace(target_dictionary=DICT), SimpleNamespace(beam=1, max_len_a=0.0, max_len_b=10)
    generator = build_speculative(task, [build_transformer(DICT, seed=0)], args, "specdec", drafter,
                                  DraftLengthOptions(draft_length=length), 3)
    assert generator.cfg.adaptive == adaptive and (generator.guard is not None) == guarded


def test_nothing_past_a_drafted_eos_or_pad_is_verified():
    """Drafts after a row's first EOS or pad cannot be accepted: the block stops at the longest
    useful draft of the batch (at batch 1: at the drafted EOS); the output is unchanged."""
    model = build_transformer(DICT, seed=0, eos_boost=1.2)  # outputs of 5-12 tokens, below max_len
    junk = torch.tensor([5, 6, 7, 5, 6, 7, 5, 6, 7, 5])
    for seed, src_lengths in enumerate([[3], [9], [6], [4, 7]]):
        batch = make_batch(DICT, src_lengths, seed=seed)
        reference = greedy(model, batch, max_len_b=20)
        drafter = OracleDrafter([torch.cat([hypos[0]["tokens"], junk]) for hypos in reference])
        generator = SpeculativeGenerator(model, DICT, drafter, SpeculativeConfig(block_size=8, max_len_b=20))
        generator.stats.keep_trace = True
        assert_same_hypotheses(reference, generator.generate([model], batch))
        for row, hypos in enumerate(reference):
            drafted = [s.drafts for s in generator.stats.traces[0].steps[row]]
            if len(src_lengths) == 1:  # the junk after the EOS was drafted, never verified
                assert sum(len(d) for d in drafted) <= len(hypos[0]["tokens"])
            else:  # the block is as wide as the row that needs it most
                assert max(len(d) for d in drafted) <= 8
