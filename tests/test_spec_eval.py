"""Validation of the drafter simulates vanilla SpecDec: ``spec_tokens_per_iter``."""
import math
import random

import pytest
import torch
from fairseq import metrics

from drafter_helpers import DictTask, build_drafter, make_dictionary, random_batch
from fairseq_plugins.criterions.glancing_block_loss import GlancingBlockLoss, simulate_specdec


def right_padded(rows, pad):
    out = torch.full((len(rows), max(map(len, rows))), pad)
    for i, row in enumerate(rows):
        out[i, :len(row)] = torch.tensor(row)
    return out


def partly_predictable_targets(drafter, dictionary, src, src_lengths, n_blocks=3, seed=0):
    """Per row: a few times, the drafter's own next r (random) drafted tokens then one other
    token; then eos.  Acceptance lengths vary from 0 to k."""
    rng, k, eos = random.Random(seed), drafter.block_size, dictionary.eos()
    targets = []
    for i in range(src.size(0)):
        encoder_out = drafter.encoder(src[i:i + 1], src_lengths[i:i + 1])
        tokens = []
        for _ in range(n_blocks):
            prefix = torch.tensor([[eos] + tokens])
            draft = drafter.propose(encoder_out, prefix, torch.tensor([len(tokens) + 1]), k)[0].tolist()
            r = rng.randint(0, k - 1)
            taken = [t for t in draft[:r] if t != eos][:r]
            words = [w for w in range(dictionary.nspecial, len(dictionary)) if w != draft[len(taken)]]
            tokens += taken + [rng.choice(words)]
        targets.append(tokens + [eos])
    return targets


def one_by_one(drafter, src, src_lengths, targets, pad, eos):
    """The plain per-sentence loop: (tokens, iterations) summed over sentences."""
    k, total_tokens, total_iterations = drafter.block_size, 0, 0
    for i, target in enumerate(targets):
        real_src = src[i:i + 1, src.size(1) - int(src_lengths[i]):]  # left padding removed
        encoder_out = drafter.encoder(real_src, src_lengths[i:i + 1])
        p = 0
        while p < len(target):
            prefix = torch.tensor([[eos] + target[:p]])
            draft = drafter.propose(encoder_out, prefix, torch.tensor([p + 1]), k)[0].tolist()
            n = 0
            while n < k and p + n < len(target) and draft[n] == target[p + n]:
                n += 1
            p += n + 1
            total_iterations += 1
        total_tokens += len(target)
    return total_tokens, total_iterations


@pytest.fixture(scope="module")
def setting():
    dictionary = make_dictionary(20)
    drafter = build_drafter(dictionary, seed=1)
    src, src_lengths, _, _ = random_batch(dictionary, [9, 5, 2, 7, 4], [1] * 5, seed=4)
    targets = partly_predictable_targets(drafter, dictionary, src, src_lengths)
    return dictionary, drafter, src, src_lengths, targets


def test_batched_simulation_equals_the_per_sentence_loop(setting):
    dictionary, drafter, src, src_lengths, targets = setting
    pad, eos = dictionary.pad(), dictionary.eos()
    expected = one_by_one(drafter, src, src_lengths, targets, pad, eos)
    assert simulate_specdec(drafter, src, src_lengths, right_padded(targets, pad), pad, eos) == expected
    tokens, iterations = expected
    assert 1.3 < tokens / iterations < drafter.block_size + 1  # drafts are accepted, not all of them


def criterion_metrics(drafter, dictionary, sample, **options):
    criterion = GlancingBlockLoss(DictTask(dictionary), 0.1, 0.5, 0.3, 0, 1, 0, **options)
    _, _, logging_output = criterion(drafter.eval(), sample)
    with metrics.aggregate(new_root=True) as aggregation:
        GlancingBlockLoss.reduce_metrics([logging_output])
        return aggregation.get_smoothed_values()


def test_validation_logs_spec_tokens_per_iter(setting):
    dictionary, drafter, src, src_lengths, targets = setting
    target = right_padded(targets, dictionary.pad())
    sample = {"id": torch.arange(len(targets)), "target": target,
              "net_input": {"src_tokens": src, "src_lengths": src_lengths}}
    tokens, iterations = one_by_one(drafter, src, src_lengths, targets, dictionary.pad(), dictionary.eos())
    logged = criterion_metrics(drafter, dictionary, sample)
    assert logged["spec_tokens_per_iter"] == round(tokens / iterations, 4)
    assert "spec_tokens_per_iter" not in criterion_metrics(drafter, dictionary, sample, no_spec_eval=True)
    every_other = [targets[i] for i in range(0, len(targets), 2)]
    tokens, iterations = one_by_one(drafter, src[::2], src_lengths[::2], every_other, dictionary.pad(), dictionary.eos())
    logged = criterion_metrics(drafter, dictionary, sample, spec_eval_stride=2)
    assert logged["spec_tokens_per_iter"] == round(tokens / iterations, 4)


class GoldDrafter:
    """Drafts the gold continuation of its row (the 'encoder output' is the row index)."""

    def __init__(self, target, k, pad, eos):
        self.target, self.block_size, self.pad, self.eos = target, k, pad, eos
        self.encoder = self
        self.decoder = self

    def __call__(self, src_tokens, src_lengths):
        return {"rows": torch.arange(src_tokens.size(0))}

    def reorder_encoder_out(self, encoder_out, order):
        return {"rows": encoder_out["rows"][order]}

    def max_positions(self):
        return 1000

    def propose(self, encoder_out, prefix, prefix_lengths, k):
        from fairseq_plugins.models.drafter_blocks import make_blocks

        _, _, gold = make_blocks(self.target[encoder_out["rows"]], prefix_lengths - 1, k, self.pad, self.eos)
        return gold.masked_fill(gold.eq(self.pad), self.eos)


def test_a_drafter_that_drafts_the_gold_gets_k_plus_one_tokens_per_iteration():
    dictionary, k = make_dictionary(20), 4
    pad, eos = dictionary.pad(), dictionary.eos()
    lengths = [1, 4, 5, 6, 10, 11, 13]  # eos included
    target = right_padded([[7] * (n - 1) + [eos] for n in lengths], pad)
    src = torch.full((len(lengths), 3), 5)
    tokens, iterations = simulate_specdec(GoldDrafter(target, k, pad, eos), src, torch.full((len(lengths),), 3),
                                          target, pad, eos)
    assert tokens == sum(lengths)
    assert iterations == sum(math.ceil(n / (k + 1)) for n in lengths)
