"""Parity of the experimental draft-tree decoder (tools/draft_tree.py): verifying the drafter's top-A tokens as a
tree gives fairseq's --beam 1 output, token for token and score for score, on random tiny verifiers (float64),
ragged batches and drafters whose right token sits at any rank, or at none."""
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fairseq_plugins.decoding.core import SpeculativeConfig, SpeculativeGenerator
from fairseq_plugins.decoding.drafters import Draft, Drafter
from fairseq_plugins_compat.errors import PluginError
from test_speculative_parity import DICT, RandomDrafter, assert_same_hypotheses, greedy
from tiny_models import build_transformer, make_batch
from tools import draft_tree  # imported, not through the registry: specdec-tree stays unregistered


class RankedDrafter(Drafter):
    """Knows greedy's output and puts each next token at rank 0, 1 or 2 of its scores, or nowhere, at random."""

    def __init__(self, references, seed):
        self.references = references
        self.g = torch.Generator().manual_seed(seed)

    def start(self, batch):
        self.rows = torch.arange(batch.src_tokens.size(0))

    def propose(self, tokens, lengths, k):
        scores = torch.rand(tokens.size(0), k, len(DICT), generator=self.g, dtype=torch.float64)
        for i, row in enumerate(self.rows.tolist()):
            segment = self.references[row][int(lengths[i]) - 1:][:k]
            for j, token in enumerate(segment.tolist()):
                rank = int(torch.multinomial(torch.tensor([0.45, 0.2, 0.15, 0.2]), 1, generator=self.g))
                if rank == 3:
                    continue
                order = scores[i, j].argsort(descending=True)
                scores[i, j, token] = scores[i, j, order[rank]] + (1e-6 if rank == 0 else 0.0)
                if rank > 0:  # the tokens ranked above keep their place: lift them just above it
                    scores[i, j, order[:rank]] += 1e-3
        return Draft(scores.argmax(-1), scores)

    def keep_rows(self, rows):
        self.rows = self.rows[rows]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    src_lengths=st.lists(st.integers(1, 12), min_size=1, max_size=4),
    block_size=st.sampled_from([1, 2, 4, 8]),
    shape=st.sampled_from([(3, 2, 0), (2, 1, 3), (4, 3, 0), (1, 2, 0), (3, 0, 2)]),
    eos_boost=st.sampled_from([0.0, 1.0, 2.5]),
    max_len_b=st.integers(1, 16),
    min_len=st.integers(1, 3),
)
def test_draft_tree_gives_greedy_output(seed, src_lengths, block_size, shape, eos_boost, max_len_b, min_len):
    assume(min_len <= int(1.2 * (max(src_lengths) + 1) + max_len_b))
    model = build_transformer(DICT, seed=seed % 50, eos_boost=eos_boost)
    batch = make_batch(DICT, src_lengths, seed=seed)
    lengths = dict(max_len_a=1.2, max_len_b=max_len_b, min_len=min_len)
    reference = greedy(model, batch, **lengths)
    references = [hypos[0]["tokens"] for hypos in reference]
    ranks, continuation, positions = shape
    generator = draft_tree.TreeGenerator(model, DICT, RankedDrafter(references, seed),
                                         SpeculativeConfig(block_size=block_size, **lengths), ranks=ranks,
                                         continuation=continuation, positions=positions)
    assert_same_hypotheses(reference, generator.generate([model], batch))


def test_a_tree_accepts_more_per_iteration_than_its_main_draft():
    """Where the right token is often the drafter's second, the tree gains tokens per iteration the chain loses."""
    model = build_transformer(DICT, seed=3, eos_boost=1.0)
    batch = make_batch(DICT, [10, 7, 12], seed=3)
    reference = greedy(model, batch, max_len_b=20)
    references = [hypos[0]["tokens"] for hypos in reference]
    cfg = SpeculativeConfig(block_size=6, max_len_b=20)
    chain = draft_tree.TreeGenerator(model, DICT, RankedDrafter(references, 1), cfg, ranks=1)
    tree = draft_tree.TreeGenerator(model, DICT, RankedDrafter(references, 1), cfg, ranks=3, continuation=2)
    assert_same_hypotheses(reference, chain.generate([model], batch))
    assert_same_hypotheses(reference, tree.generate([model], batch))
    per_iteration = {name: g.stats.summary()["mean_accepted_per_iteration"] for name, g in (("chain", chain),
                                                                                              ("tree", tree))}
    assert per_iteration["tree"] > per_iteration["chain"], per_iteration


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_one_rank_tree_is_the_core_chain_under_specdec_plus_plus(seed):
    """With one rank the tree is the main draft alone: under SpecDec++'s rule (beta 3, tau 1) the tree's own
    acceptance gives the core's output, scores and iterations."""
    model = build_transformer(DICT, seed=seed, eos_boost=1.0)
    batch = make_batch(DICT, [9, 4, 12], seed=seed)
    references = [hypos[0]["tokens"] for hypos in greedy(model, batch, max_len_b=20)]
    cfg = SpeculativeConfig(block_size=5, beta=3, tau=1.0, max_len_b=20)
    core = SpeculativeGenerator(model, DICT, RankedDrafter(references, seed), cfg)
    tree = draft_tree.TreeGenerator(model, DICT, RankedDrafter(references, seed), cfg, ranks=1)
    assert_same_hypotheses(core.generate([model], batch), tree.generate([model], batch))
    assert tree.stats.summary() == core.stats.summary()


def test_a_drafter_without_scores_is_verified_as_a_chain():
    """A drafter that returns bare tokens (no scores to rank) gets the core's chain: greedy's output."""
    model = build_transformer(DICT, seed=5, eos_boost=1.0)
    batch = make_batch(DICT, [6, 11], seed=5)
    reference = greedy(model, batch, max_len_b=12)
    generator = draft_tree.TreeGenerator(model, DICT, RandomDrafter(5, len(DICT)),
                                         SpeculativeConfig(block_size=4, max_len_b=12))
    assert_same_hypotheses(reference, generator.generate([model], batch))
    assert generator.trees == {}


@pytest.mark.parametrize("options, message", [(dict(adaptive=True), "whole blocks")])
def test_draft_tree_refuses_what_it_does_not_do(options, message):
    model = build_transformer(DICT, seed=0)
    with pytest.raises(PluginError, match=message):
        draft_tree.TreeGenerator(model, DICT, RankedDrafter([], 0), SpeculativeConfig(block_size=4, **options))
