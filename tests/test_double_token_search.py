"""Algorithm 1 and greedy pair search on scripted decoders (no model).

A script maps a hypothesis (generated tokens so far) to the log-probs of its next pair;
the expected K-best come from hand computation and from a plain, unbatched transcription
of the paper's Algorithm 1.
"""
import math
import random

import pytest
import torch

from fairseq_plugins.double_token.search import SearchConfig, beam_search, greedy_search

NEG_INF = float("-inf")


def script_from_table(table, default=((0.25,) * 4, (0.25,) * 4)):
    """Script from probabilities: ``table[prefix] = (left probs, right probs)``."""
    def script(prefix):
        left, right = table.get(tuple(prefix), default)
        return [math.log(p) if p > 0 else NEG_INF for p in left], [math.log(p) if p > 0 else NEG_INF for p in right]
    return script


def random_script(seed, vocab=5):
    """Random distributions per prefix (deterministic); EOD (id 0) grows likelier with length."""
    def script(prefix):
        rng = random.Random(hash((seed,) + tuple(prefix)))
        step = len(prefix) // 2 + 1

        def dist():
            logits = [rng.gauss(0, 1.5) for _ in range(vocab)]
            logits[0] += 0.9 * step - 1.5
            norm = math.log(sum(math.exp(x) for x in logits))
            return [x - norm for x in logits]

        return dist(), dist()
    return script


class ScriptedStepper:
    """Stepper over per-sentence scripts; checks that rows continue the rows the search said."""

    def __init__(self, scripts, bsz, width):
        self.scripts = scripts if isinstance(scripts, list) else [scripts] * bsz
        self.sentence = [b for b in range(bsz) for _ in range(width)]
        self.expected = None  # each row's generated tokens at the previous step

    def step(self, tokens):
        rows = [tuple(row[2:]) for row in tokens.tolist()]
        assert len(rows) == len(self.sentence)
        if self.expected is not None:
            assert [row[:-2] for row in rows] == self.expected
        self.expected = rows
        return torch.tensor([list(self.scripts[s](row)) for s, row in zip(self.sentence, rows)], dtype=torch.float64)

    def reorder(self, rows):
        rows = rows.tolist()
        self.sentence = [self.sentence[r] for r in rows]
        self.expected = [self.expected[r] for r in rows]


def reference_algorithm1(script, width, nbest, max_steps, eod, lenpen):
    """Algorithm 1 as printed, one sentence, every pair enumerated. Returns [(tokens, score)]."""
    beam, finished = [((), (), 0.0)], []
    for step in range(1, max_steps + 1):
        candidates = []
        for tokens, lps, score in beam:
            left, right = script(tokens)
            if step == max_steps:  # forced end: only (EOD, EOD)
                left = [lp if i == eod else NEG_INF for i, lp in enumerate(left)]
                right = [lp if i == eod else NEG_INF for i, lp in enumerate(right)]
            candidates += [(score + la + lb, tokens + (a, b), lps + (la, lb))
                           for a, la in enumerate(left) for b, lb in enumerate(right) if la > NEG_INF < lb]
        candidates = sorted(candidates, key=lambda c: -c[0])[: 3 * width]  # DOUBLETOPK
        finished += [(list(tokens), sum(lps) / len(tokens) ** lenpen)
                     for _, tokens, lps in candidates[:width] if eod in tokens[-2:]]  # FINALIZE
        beam = [(tokens, lps, score) for score, tokens, lps in candidates if eod not in tokens[-2:]][:width]
        if len(finished) >= nbest or not beam:
            break
    return sorted(finished, key=lambda f: -f[1])[:nbest]


def run(search, script, bsz=1, **options):
    cfg = SearchConfig(eod=0, **{"max_steps": 6, **options})
    stepper = ScriptedStepper(script, bsz, cfg.beam if search is beam_search else 1)
    return search(stepper, torch.tensor([98, 99]), bsz, cfg)


# Garden path: greedy takes (a, a) and then stops; a beam of 2 also keeps (b, a), whose
# (EOD, EOD) continuation is the best step-2 candidate. Tokens: 0 EOD, 1 a, 2 b, 3 c.
GARDEN = {
    (): ((0.05, 0.5, 0.4, 0.05), (0.02, 0.9, 0.04, 0.04)),
    (1, 1): ((0.3, 0.25, 0.25, 0.2), (0.3, 0.25, 0.25, 0.2)),
    (2, 1): ((0.9, 0.04, 0.03, 0.03), (0.9, 0.04, 0.03, 0.03)),
}


def test_garden_path_greedy_and_beam_expected_best():
    greedy = run(greedy_search, script_from_table(GARDEN))[0]
    assert [(f.tokens, f.steps) for f in greedy] == [([1, 1, 0, 0], 2)]
    assert greedy[0].score == pytest.approx(math.log(0.5 * 0.9 * 0.3 * 0.3) / 4)
    beam = run(beam_search, script_from_table(GARDEN), beam=2, nbest=1)[0]
    assert [(f.tokens, f.steps) for f in beam] == [([2, 1, 0, 0], 2)]
    assert beam[0].score == pytest.approx(math.log(0.4 * 0.9 * 0.9 * 0.9) / 4)
    assert beam[0].scores == pytest.approx([math.log(p) for p in (0.4, 0.9, 0.9, 0.9)])


def test_garden_path_two_best():
    """K = 2: step 2 finishes (b a) and (a a) from the top W = 2 candidates."""
    found = run(beam_search, script_from_table(GARDEN), beam=2, nbest=2)[0]
    assert [f.tokens for f in found] == [[2, 1, 0, 0], [1, 1, 0, 0]]


@pytest.mark.parametrize("beam,nbest", [(1, 1), (2, 1), (3, 2), (4, 4), (6, 3)])
def test_batched_beam_search_matches_reference_algorithm1(beam, nbest):
    """K-best of the batched search (sentences retire at different steps) == the reference."""
    scripts = [random_script(seed) for seed in range(6)]
    found = run(beam_search, scripts, bsz=6, beam=beam, nbest=nbest)
    for script, hyps in zip(scripts, found):
        expected = reference_algorithm1(script, beam, nbest, max_steps=6, eod=0, lenpen=1.0)
        assert [f.tokens for f in hyps] == [tokens for tokens, _ in expected]
        assert [f.score for f in hyps] == pytest.approx([score for _, score in expected])


@pytest.mark.parametrize("beam,stop_after", [(2, 2), (4, 4), (6, 3)])
def test_stop_after_k_returns_the_best_of_k(beam, stop_after):
    """--pair-beam-stop beam: the search runs until K finished, but returns only --nbest (1)."""
    scripts = [random_script(seed) for seed in range(6)]
    found = run(beam_search, scripts, bsz=6, beam=beam, nbest=1, stop_after=stop_after)
    for script, hyps in zip(scripts, found):
        expected = reference_algorithm1(script, beam, stop_after, max_steps=6, eod=0, lenpen=1.0)
        assert [f.tokens for f in hyps] == [expected[0][0]]


def test_stop_after_k_finds_the_longer_better_hypothesis():
    """K = 1 returns (a a EOD EOD) finished at step 2; K = 2 waits for a longer, better-per-token one."""
    table = {
        (): ((0.05, 0.5, 0.4, 0.05), (0.05, 0.9, 0.025, 0.025)),
        (1, 1): ((0.6, 0.2, 0.1, 0.1), (0.6, 0.2, 0.1, 0.1)),
        (2, 1): ((0.02, 0.02, 0.02, 0.94), (0.02, 0.02, 0.02, 0.94)),
        (2, 1, 3, 3): ((0.97, 0.01, 0.01, 0.01), (0.97, 0.01, 0.01, 0.01)),
    }
    first = run(beam_search, script_from_table(table), beam=2, nbest=1)[0]
    assert [f.tokens for f in first] == [[1, 1, 0, 0]]
    best_of_two = run(beam_search, script_from_table(table), beam=2, nbest=1, stop_after=2)[0]
    assert [f.tokens for f in best_of_two] == [[2, 1, 3, 3, 0, 0]]
    assert best_of_two[0].score > first[0].score


def test_lenpen_zero_ranks_by_sum():
    scripts = [random_script(seed) for seed in range(4)]
    found = run(beam_search, scripts, bsz=4, beam=4, nbest=3, lenpen=0.0)
    for script, hyps in zip(scripts, found):
        expected = reference_algorithm1(script, 4, 3, max_steps=6, eod=0, lenpen=0.0)
        assert [f.tokens for f in hyps] == [tokens for tokens, _ in expected]


def test_greedy_equals_beam_of_one():
    scripts = [random_script(seed) for seed in range(6)]
    greedy = run(greedy_search, scripts, bsz=6)
    beam = run(beam_search, scripts, bsz=6, beam=1, nbest=1)
    assert [[f.tokens for f in g] for g in greedy] == [[f.tokens for f in b] for b in beam]
    assert [g[0].score for g in greedy] == pytest.approx([b[0].score for b in beam])


def test_last_step_forces_eod():
    never_stop = script_from_table({}, default=((1e-6, 0.5, 0.3, 0.2), (1e-6, 0.5, 0.3, 0.2)))
    found = run(beam_search, never_stop, beam=2, nbest=2, max_steps=3)[0]
    assert len(found) == 2 and all(f.tokens[-2:] == [0, 0] and len(f.tokens) == 6 for f in found)
    assert run(greedy_search, never_stop, max_steps=3)[0][0].tokens == [1, 1, 1, 1, 0, 0]
