"""The verifier's choice after each drafted prefix: the host shortcut gives top-k's token and score, ties included."""
import math

import pytest
import torch

from fairseq_plugins.decoding import acceptance


def topk_choices(lprobs, cum):
    """The reference: fairseq's beam search with beam 1 (top-2 of the sums, the first one)."""
    scores, tokens = (lprobs + cum.unsqueeze(-1)).topk(2, dim=-1)
    return tokens[:, :, 0], scores[:, :, 0]


def assert_same_choices(lprobs, cum):
    tokens, scores = acceptance.verifier_choices(lprobs, cum)
    expected_tokens, expected_scores = topk_choices(lprobs, cum)
    assert torch.equal(tokens, expected_tokens)
    assert torch.equal(scores, expected_scores)


@pytest.mark.parametrize("rows,columns", [(1, 1), (1, 11), (4, 6)])
def test_shortcut_is_topk_first_on_random_log_probs(rows, columns):
    generator = torch.Generator().manual_seed(rows * 100 + columns)
    for _ in range(20):
        lprobs = torch.log_softmax(3 * torch.randn(rows, columns, 500, generator=generator), dim=-1)
        cum = -30 * torch.rand(rows, columns, generator=generator)
        shortcut = acceptance.unique_choices_on_host(lprobs, cum)
        assert shortcut is not None  # no near-tie in random log-probs: the shortcut answers
        expected_tokens, expected_scores = topk_choices(lprobs, cum)
        assert torch.equal(shortcut[0], expected_tokens) and torch.equal(shortcut[1], expected_scores)
        assert_same_choices(lprobs, cum)


def test_a_tie_made_by_the_sum_is_left_to_topk():
    """Two log-probs one float32 step apart round to the same sum after a large cumulative score: the shortcut
    declines, and the choice is top-k's whichever of the two that is."""
    lprobs = torch.full((1, 2, 50), -20.0)
    best = torch.tensor(-0.5)
    lprobs[0, :, 7] = best
    lprobs[0, :, 3] = torch.nextafter(best, torch.tensor(-1.0))  # a hair below, at a lower index
    cum = torch.tensor([[-40.0, -0.0]])
    sums = lprobs[0, 0, [3, 7]] + cum[0, 0]
    assert sums[0] == sums[1]  # the sum merged them (column 0); column 1 keeps them apart
    assert acceptance.unique_choices_on_host(lprobs, cum) is None
    assert_same_choices(lprobs, cum)


@pytest.mark.parametrize("value", [-math.inf, 0.0])
def test_exact_ties_and_masked_rows_are_left_to_topk(value):
    lprobs = torch.full((2, 3, 20), value)
    lprobs[0, 0, 5] = -1.0 if value == -math.inf else value  # row 0: a tie (0.0) or a single finite entry
    cum = torch.zeros(2, 3)
    assert acceptance.unique_choices_on_host(lprobs, cum) is None
    assert_same_choices(lprobs, cum)
