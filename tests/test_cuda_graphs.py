"""``--cuda-graphs``' static steps (``decoding/cuda_graphs.py``), run eagerly on the CPU: the same drafts as the
ordinary drafter cache call by call, greedy's output at batch 1, the ordinary caches for everything the fixed
buffers cannot hold, and the option's choice. On CUDA, where they replay graphs: tests/test_cuda.py."""
import pytest
import torch
from fairseq.sequence_generator import SequenceGenerator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drafter_helpers import build_drafter, build_verifier, drafter_with_head, make_dictionary
from fairseq_plugins.decoding import cuda_graphs
from fairseq_plugins.decoding.core import SpeculativeConfig, SpeculativeGenerator
from fairseq_plugins.decoding.drafters import BatchStart
from fairseq_plugins.decoding.specdec import BlockDrafter
from fairseq_plugins_compat.errors import PluginError
from tiny_models import make_batch

DICT = make_dictionary(14)


def pair(seed, learned_pos=False):
    """A random tiny verifier and drafter (float32)."""
    return build_verifier(DICT, seed=seed, decoder_learned_pos=learned_pos), \
        build_drafter(DICT, seed=seed + 1, decoder_learned_pos=learned_pos)


def reading_the_verifiers_encoder(drafter, vocab_limit=0, shared=True):
    """An ordinary ``BlockDrafter`` whose drafter reads the verifier's encoder output, as one trained with
    ``--share-verifier-encoder`` does (random weights: any encoder of the same width serves)."""
    adapter = BlockDrafter(drafter, vocab_limit=vocab_limit)
    adapter.uses_verifier_encoder = shared
    return adapter


class ComparingDrafter(cuda_graphs.GraphedBlockDrafter):
    """The graphed drafter, with an ordinary ``BlockDrafter`` answering the same calls beside it: the calls whose
    drafts or scores (equal up to float32 rounding: another summation order) differ."""

    def __init__(self, drafter, block_size, vocab_limit=0):
        super().__init__(reading_the_verifiers_encoder(drafter, vocab_limit), block_size)
        self.reference = reading_the_verifiers_encoder(drafter, vocab_limit)
        self.proposals, self.differing = 0, []

    def start(self, batch):
        super().start(batch)
        self.reference.start(batch)

    def propose(self, tokens, lengths, k):
        draft = super().propose(tokens, lengths, k)
        expected = self.reference.propose(tokens, lengths, k)
        self.proposals += 1
        same_scores = draft.scores is None and expected.scores is None or \
            torch.allclose(draft.scores, expected.scores, atol=1e-5)  # a sequential head's drafts have none
        if not (torch.equal(draft.tokens, expected.tokens) and same_scores):
            self.differing.append((lengths.tolist(), draft.tokens.tolist(), expected.tokens.tolist()))
        return draft

    def keep_rows(self, rows):
        super().keep_rows(rows)
        self.reference.keep_rows(rows)


def graphed_generator(verifier, drafter, k, vocab_limit=0, **config):
    cfg = SpeculativeConfig(block_size=k, **config)
    adapter = ComparingDrafter(drafter, k, vocab_limit)
    generator = SpeculativeGenerator(verifier, DICT, adapter, cfg)
    generator.cache_factory = cuda_graphs.GraphedVerifierCaches(k + 1, generator.max_len)
    return generator, adapter


def greedy_tokens(verifier, batch, max_len_b):
    found = SequenceGenerator([verifier], DICT, beam_size=1, max_len_b=max_len_b).generate([verifier], batch)
    return [hypos[0]["tokens"].tolist() for hypos in found]


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 500), src_lengths=st.lists(st.integers(1, 9), min_size=1, max_size=4),
       k=st.integers(1, 4), adaptive=st.booleans(), learned_pos=st.booleans(), vocab_limit=st.sampled_from([0, 9]))
def test_static_steps_draft_as_the_drafter_cache_and_give_greedy_output(seed, src_lengths, k, adaptive, learned_pos,
                                                                        vocab_limit):
    verifier, drafter = pair(seed, learned_pos)
    generator, adapter = graphed_generator(verifier, drafter, k, vocab_limit, adaptive=adaptive, max_len_b=14)
    for i, length in enumerate(src_lengths):  # one sentence per batch: the static steps
        batch = make_batch(DICT, [length], seed=seed + i)
        ours = generator.generate([verifier], batch)
        assert [hypos[0]["tokens"].tolist() for hypos in ours] == greedy_tokens(verifier, batch, 14)
    assert adapter.static_proposals == adapter.proposals > 0 and adapter.differing == []
    assert isinstance(generator.cache_factory.static, cuda_graphs.StaticVerifier)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 500), src_lengths=st.lists(st.integers(1, 9), min_size=1, max_size=3),
       k=st.integers(1, 4), adaptive=st.booleans(), vocab_limit=st.sampled_from([0, 9]))
def test_static_steps_run_a_sequential_head_as_the_drafter_cache_and_give_greedy_output(seed, src_lengths, k,
                                                                                          adaptive, vocab_limit):
    """A drafter with a sequential head: the static step drafts through the head (its walk on the device) as the
    ordinary cached drafter does (on the host), call by call; the output is greedy's."""
    verifier, drafter = build_verifier(DICT, seed=seed), drafter_with_head(DICT, seed + 1)
    generator, adapter = graphed_generator(verifier, drafter, k, vocab_limit, adaptive=adaptive, max_len_b=14)
    assert adapter.static.head is not None
    for i, length in enumerate(src_lengths):
        batch = make_batch(DICT, [length], seed=seed + i)
        ours = generator.generate([verifier], batch)
        assert [hypos[0]["tokens"].tolist() for hypos in ours] == greedy_tokens(verifier, batch, 14)
    assert adapter.static_proposals == adapter.proposals > 0 and adapter.differing == []


def test_catching_up_feeds_the_static_step_in_chunks():
    """After iterations without drafting (the draft-length guard) more tokens than M = k + 1 are new: fed in chunks."""
    verifier, drafter = pair(3)
    k = 2
    reference = reading_the_verifiers_encoder(drafter)
    adapter = cuda_graphs.GraphedBlockDrafter(reading_the_verifiers_encoder(drafter), k)
    src = make_batch(DICT, [6], seed=1)["net_input"]
    encoder_out = verifier.encoder(src["src_tokens"], src_lengths=src["src_lengths"])
    start = BatchStart(src["src_tokens"], src["src_lengths"], 40, encoder_out)
    adapter.start(start)
    reference.start(start)
    tokens = torch.randint(DICT.nspecial, len(DICT), (1, 20), generator=torch.Generator().manual_seed(0))
    tokens[0, 0] = DICT.eos()
    for length in (1, 2, 9, 10, 17):  # jumps of 7 > M = 3
        lengths = torch.tensor([length])
        draft, expected = adapter.propose(tokens, lengths, k), reference.propose(tokens, lengths, k)
        assert torch.equal(draft.tokens, expected.tokens) and torch.allclose(draft.scores, expected.scores, atol=1e-5)
    assert adapter.static_proposals == 5


@pytest.mark.parametrize("slots, static_drafts", [({"SOURCE_SLOTS": 4}, "some"), ({"TARGET_SLOTS": 9}, "some"),
                                                   ({"TARGET_SLOTS": 3}, "none")])
def test_what_the_fixed_buffers_cannot_hold_runs_on_the_ordinary_caches(monkeypatch, slots, static_drafts):
    """Sources longer than SOURCE_SLOTS, and outputs that may outgrow TARGET_SLOTS (the verifier from the start, the
    drafter from where its prefix reaches them), go to the ordinary caches; batches of several rows too."""
    for name, value in slots.items():
        monkeypatch.setattr(cuda_graphs, name, value)
    verifier, drafter = pair(11)
    generator, adapter = graphed_generator(verifier, drafter, 3, max_len_b=12)
    for i, length in enumerate([2, 8, 3]):
        batch = make_batch(DICT, [length], seed=i)
        assert [h[0]["tokens"].tolist() for h in generator.generate([verifier], batch)] == greedy_tokens(verifier, batch, 12)
    batch = make_batch(DICT, [5, 2, 7], seed=9)
    assert [h[0]["tokens"].tolist() for h in generator.generate([verifier], batch)] == greedy_tokens(verifier, batch, 12)
    assert adapter.differing == [] and adapter.proposals > 0
    assert (0 < adapter.static_proposals < adapter.proposals) if static_drafts == "some" else adapter.static_proposals == 0


def test_the_option_chooses_graphs_where_the_pair_allows_them():
    verifier, drafter = pair(5)
    ordinary = reading_the_verifiers_encoder(drafter)
    assert not cuda_graphs.wanted("auto", ordinary, verifier)  # a CPU: auto is off
    assert not cuda_graphs.wanted("off", ordinary, verifier)
    assert cuda_graphs.wanted("on", ordinary, verifier)
    own_encoder = reading_the_verifiers_encoder(drafter, shared=False)
    assert cuda_graphs.graph_problems(own_encoder, verifier) == \
        "the drafter runs its own encoder (trained without --share-verifier-encoder)"
    with pytest.raises(PluginError, match="--cuda-graphs on: the drafter runs its own encoder"):
        cuda_graphs.wanted("on", own_encoder, verifier)
    assert not cuda_graphs.wanted("auto", own_encoder, verifier)
