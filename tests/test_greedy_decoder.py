"""``--decoding greedy``: the speculative core drafting nothing is fairseq's ``--beam 1``, token for
token, one verified token per row and iteration, with each ``--verifier-matmul`` choice."""
from types import SimpleNamespace

import pytest
import torch

from fairseq_plugins.decoding.incremental import VerifierCache
from fairseq_plugins.decoding.registry import DECODERS
from test_speculative_parity import assert_same_hypotheses, greedy, record_block_widths
from tiny_models import build_transformer, make_batch, make_dictionary, round_to_half

DICT = make_dictionary(12)
MAX_LEN_B = 20


def build_greedy(model, **options):
    """The registered ``greedy`` generator for ``model``, as the task builds it."""
    entry = DECODERS["greedy"]
    task, args = SimpleNamespace(target_dictionary=DICT), SimpleNamespace(beam=1, max_len_a=0.0, max_len_b=MAX_LEN_B)
    return entry.build(task, [model], args, entry.options(**options))


@pytest.mark.parametrize("src_lengths", [[7], [3], [5, 2, 9, 1], [4, 8, 6]], ids=["b1", "b1-short", "b4", "b3"])
@pytest.mark.parametrize("seed", range(3))
def test_greedy_equals_beam1(seed, src_lengths):
    model = build_transformer(DICT, seed=seed, eos_boost=1.0)  # float64: no rounding differences
    batch = make_batch(DICT, src_lengths, seed=seed)
    assert_same_hypotheses(greedy(model, batch, max_len_b=MAX_LEN_B), build_greedy(model).generate([model], batch))


@pytest.mark.parametrize("matmul", ["auto", "packed", "plain"])
def test_float32_greedy_equals_beam1_with_each_product(matmul):
    """A float32 model whose weights are float16 numbers (what ``auto`` stores as float16)."""
    for seed in range(3):
        model = round_to_half(build_transformer(DICT, seed=seed, eos_boost=1.0, dtype=torch.float32))
        batch = make_batch(DICT, [5, 2, 9], seed=seed)
        reference = greedy(model, batch, max_len_b=MAX_LEN_B)
        ours = build_greedy(model, verifier_matmul=matmul).generate([model], batch)
        assert [h[0]["tokens"].tolist() for h in ours] == [h[0]["tokens"].tolist() for h in reference], seed


def test_one_verified_token_per_row_and_iteration():
    model = build_transformer(DICT, seed=4, eos_boost=1.0)
    batch = make_batch(DICT, [6, 3, 8], seed=1)
    generator = build_greedy(model)
    blocks = record_block_widths(generator)
    hypotheses = generator.generate([model], batch)
    assert set(blocks) == {1}  # the pending token alone, never a draft
    for hypos in hypotheses:
        assert hypos[0]["steps"] == len(hypos[0]["tokens"])  # one iteration per token, EOS included
        assert hypos[0]["accepted_per_iteration"] == [1] * len(hypos[0]["tokens"])
    summary = generator.stats.summary()
    assert summary["mean_accepted_per_iteration"] == 1.0 and summary["sentences"] == 3
    assert len(blocks) == max(len(h[0]["tokens"]) for h in hypotheses)  # the batch runs until its longest row ends


def test_greedy_has_no_block_size_and_measures_nothing():
    entry = DECODERS["greedy"]
    assert entry.greedy_equivalent and not entry.needs_drafter
    assert set(entry.option_names()) == {"draft_length", "verifier_matmul", "cuda_graphs"}
    generator = build_greedy(build_transformer(DICT, seed=0), draft_length="measured")
    assert generator.guard is None and generator.cfg.block_size == 0 and not generator.cfg.adaptive


def test_cuda_graph_steps_run_eagerly_on_a_cpu_and_keep_the_output():
    """--cuda-graphs on (on a CPU: the static steps, eagerly): batch 1 runs on the static verifier cache, one-token
    blocks; a batch of several rows on the ordinary cache; the output is --beam 1's either way."""
    from fairseq_plugins.decoding.cuda_graphs import StaticVerifierCache

    model = build_transformer(DICT, seed=2, eos_boost=1.0)
    generator = build_greedy(model, cuda_graphs="on")
    made = []
    factory = generator.cache_factory

    def recording_factory(*args, **kwargs):
        made.append(factory(*args, **kwargs))
        return made[-1]

    generator.cache_factory = recording_factory
    for src_lengths in ([6], [9], [4, 7]):
        batch = make_batch(DICT, src_lengths, seed=len(src_lengths))
        assert_same_hypotheses(greedy(model, batch, max_len_b=MAX_LEN_B), generator.generate([model], batch))
    assert [isinstance(cache, StaticVerifierCache) for cache in made] == [True, True, False]
    assert factory.static.graphs == {} and factory.m_max == 1  # eager on a CPU: no graph captured
    assert build_greedy(model).cache_factory is VerifierCache  # auto: graphs on CUDA only
