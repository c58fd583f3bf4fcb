"""SpecDec with the drafter's KV cache: the same drafts as without it (so the same iterations)
and greedy's output, over random verifiers/drafters, ragged batches, fixed and adaptive length."""
import pytest
import torch
from torch import nn
from fairseq.sequence_generator import SequenceGenerator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drafter_helpers import build_drafter, build_verifier, make_dictionary
from fairseq_plugins.decoding.core import SpeculativeConfig, SpeculativeGenerator
from fairseq_plugins.decoding.linears import HalfWeightLinears, half_weights_available
from fairseq_plugins.decoding.specdec import BlockDrafter
from tiny_models import make_batch, round_to_half

DICT = make_dictionary(14)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 500), src_lengths=st.lists(st.integers(1, 9), min_size=1, max_size=4),
       k=st.integers(1, 4), adaptive=st.booleans(), learned_pos=st.booleans(), layers=st.sampled_from([1, 2, 3]))
def test_cached_drafter_drafts_as_the_uncached_one(seed, src_lengths, k, adaptive, learned_pos, layers):
    verifier = build_verifier(DICT, seed=seed)
    drafter = build_drafter(DICT, seed=seed + 1, decoder_learned_pos=learned_pos, decoder_layers=layers)
    assert len(drafter.decoder.layers) == layers
    batch = make_batch(DICT, src_lengths, seed=seed)
    cfg = SpeculativeConfig(block_size=k, adaptive=adaptive, max_len_b=14)
    runs = []
    for cached in (True, False):
        adapter = BlockDrafter(drafter, cached=cached)
        assert (adapter.cached) == cached
        runs.append(SpeculativeGenerator(verifier, DICT, adapter, cfg).generate([verifier], batch))
    greedy = SequenceGenerator([verifier], DICT, beam_size=1, max_len_b=14).generate([verifier], batch)
    for with_cache, without, reference in zip(*runs, greedy):
        assert with_cache[0]["tokens"].tolist() == without[0]["tokens"].tolist() == reference[0]["tokens"].tolist()
        assert with_cache[0]["accepted_per_iteration"] == without[0]["accepted_per_iteration"]


def test_hypotheses_are_ordinary_tensors_after_inference_mode():
    """The core decodes in torch.inference_mode; its hypotheses must still be tensors that
    callers may change in place outside it (fairseq-generate divides positional scores by
    log 2 in place) and that a drafter's training may use afterwards."""
    import math

    verifier = build_verifier(DICT, seed=4)
    batch = make_batch(DICT, [5, 3], seed=4)
    generator = SpeculativeGenerator(verifier, DICT, BlockDrafter(build_drafter(DICT, seed=5)),
                                     SpeculativeConfig(block_size=3, max_len_b=10))
    for hypos in generator.generate([verifier], batch):
        hypo = hypos[0]
        for name in ("tokens", "score", "positional_scores"):
            assert not hypo[name].is_inference(), name
        before = hypo["positional_scores"].clone()
        hypo["positional_scores"].div_(math.log(2))
        torch.testing.assert_close(hypo["positional_scores"] * math.log(2), before)
    loss = sum(p.sum() for p in verifier.parameters())  # the models still train
    loss.backward()


def test_draft_carries_the_drafters_log_probs():
    drafter = build_drafter(DICT, seed=3)
    adapter = BlockDrafter(drafter)
    batch = make_batch(DICT, [4, 6], seed=1)
    from fairseq_plugins.decoding.drafters import BatchStart

    adapter.start(BatchStart(batch["net_input"]["src_tokens"], batch["net_input"]["src_lengths"], 20, None))
    tokens = torch.full((2, 8), DICT.pad())
    tokens[:, 0] = DICT.eos()
    draft = adapter.propose(tokens, torch.tensor([1, 1]), 3)
    assert draft.tokens.shape == (2, 3) and draft.lprobs.shape == (2, 3, len(DICT))
    assert torch.equal(draft.lprobs.argmax(-1), draft.tokens)
    torch.testing.assert_close(draft.lprobs.exp().sum(-1), torch.ones(2, 3))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 500), src_lengths=st.lists(st.integers(1, 9), min_size=1, max_size=3),
       limit=st.sampled_from([6, 9, 12]))
def test_draft_vocabulary_limit_keeps_greedy_output(seed, src_lengths, limit):
    """Drafting among the first N entries only: drafts stay below N (cached == uncached), and the
    output is still greedy's."""
    verifier = build_verifier(DICT, seed=seed)
    drafter = build_drafter(DICT, seed=seed + 1)
    batch = make_batch(DICT, src_lengths, seed=seed)
    cfg = SpeculativeConfig(block_size=3, max_len_b=14)
    greedy = SequenceGenerator([verifier], DICT, beam_size=1, max_len_b=14).generate([verifier], batch)
    runs = []
    for cached in (True, False):
        adapter = BlockDrafter(drafter, cached=cached, vocab_limit=limit)
        generator = SpeculativeGenerator(verifier, DICT, adapter, cfg)
        generator.stats.keep_trace = True
        runs.append(generator.generate([verifier], batch))
        drafted = [t for trace in generator.stats.traces for steps in trace.steps.values() for s in steps for t in s.drafts]
        assert drafted and max(drafted) < limit
    for with_cache, without, reference in zip(*runs, greedy):
        assert with_cache[0]["tokens"].tolist() == without[0]["tokens"].tolist() == reference[0]["tokens"].tolist()
        assert with_cache[0]["accepted_per_iteration"] == without[0]["accepted_per_iteration"]


def test_default_draft_vocabulary_covers_95_percent_of_the_counts():
    from fairseq.data import Dictionary

    from fairseq_plugins.decoding.specdec import frequent_entries

    dictionary = Dictionary()
    for word, count in [("a", 50), ("b", 30), ("c", 15), ("d", 4), ("e", 1)]:
        dictionary.add_symbol(word, n=count)
    assert frequent_entries(dictionary) == dictionary.nspecial + 3  # 50 + 30 + 15 = 95 of 100
    assert frequent_entries(dictionary, coverage=0.96) == dictionary.nspecial + 4
    dictionary.add_symbol("f", n=7)  # not sorted by count any more: the whole vocabulary
    assert frequent_entries(dictionary) == 0
    assert frequent_entries(Dictionary()) == 0  # no counts


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 500), src_lengths=st.lists(st.integers(1, 9), min_size=1, max_size=4),
       k=st.integers(1, 4), adaptive=st.booleans(), limit=st.sampled_from([0, 9]))
def test_int8_drafter_keeps_greedy_output(seed, src_lengths, k, adaptive, limit):
    """``--drafter-precision int8``: the drafter's products in int8, the output still greedy's."""
    from fairseq_plugins.decoding.linears import Int8Linears

    verifier = build_verifier(DICT, seed=seed)
    drafter = build_drafter(DICT, seed=seed + 1)
    batch = make_batch(DICT, src_lengths, seed=seed)
    cfg = SpeculativeConfig(block_size=k, adaptive=adaptive, max_len_b=14)
    adapter = BlockDrafter(drafter, vocab_limit=limit, linear=Int8Linears())
    ours = SpeculativeGenerator(verifier, DICT, adapter, cfg).generate([verifier], batch)
    greedy = SequenceGenerator([verifier], DICT, beam_size=1, max_len_b=14).generate([verifier], batch)
    assert adapter.cache.layers is not None  # the lean layers ran the int8 products
    for out, reference in zip(ours, greedy):
        assert out[0]["tokens"].tolist() == reference[0]["tokens"].tolist()


@pytest.mark.skipif(not half_weights_available(), reason="no fbgemm float16 linear")
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 500), src_lengths=st.lists(st.integers(1, 9), min_size=1, max_size=4),
       k=st.integers(1, 4), limit=st.sampled_from([0, 9]), exported_drafter=st.booleans())
def test_half_weight_products_keep_greedy_output(seed, src_lengths, k, limit, exported_drafter):
    """``--verifier-matmul auto`` and ``--drafter-precision auto`` on a verifier whose weights
    are float16 numbers (``export_checkpoint --fp16``) and a drafter exported so too or not
    (``--drafter-precision fp16`` then rounds its weights): both run float16-stored weights, and
    the output is still fairseq's greedy, token for token."""
    verifier = round_to_half(build_verifier(DICT, seed=seed))
    drafter = build_drafter(DICT, seed=seed + 1)
    drafter = round_to_half(drafter) if exported_drafter else drafter
    batch = make_batch(DICT, src_lengths, seed=seed)
    adapter = BlockDrafter(drafter, vocab_limit=limit, linear=HalfWeightLinears(round_weights=True))
    generator = SpeculativeGenerator(verifier, DICT, adapter, SpeculativeConfig(block_size=k, max_len_b=14),
                                     verifier_linear=HalfWeightLinears())
    ours = generator.generate([verifier], batch)
    greedy = SequenceGenerator([verifier], DICT, beam_size=1, max_len_b=14).generate([verifier], batch)
    assert adapter.cache.layers is not None and adapter.linear.halves and generator.verifier_linear.halves
    assert all(entry[2] is not None for entry in generator.verifier_linear.halves.values())
    for out, reference in zip(ours, greedy):
        assert out[0]["tokens"].tolist() == reference[0]["tokens"].tolist()
        torch.testing.assert_close(out[0]["positional_scores"], reference[0]["positional_scores"], rtol=0, atol=1e-5)


def test_int8_drafter_proposes_close_to_the_float_one():
    """int8 weights and inputs: log-probs within quantisation error of float's (same shapes,
    renormalised over the limited vocabulary)."""
    from fairseq_plugins.decoding.drafters import BatchStart
    from fairseq_plugins.decoding.linears import Int8Linears

    drafter = build_drafter(DICT, seed=5)
    batch = make_batch(DICT, [4, 7, 2], seed=2)
    tokens = torch.full((3, 9), DICT.pad())
    tokens[:, 0] = DICT.eos()
    tokens[:, 1:4] = torch.tensor([[5, 6, 7], [8, 5, 9], [6, 6, 4]])
    lengths = torch.tensor([4, 2, 3])
    proposals = []
    for linear in (None, Int8Linears()):
        adapter = BlockDrafter(drafter, vocab_limit=12, linear=linear)
        adapter.start(BatchStart(batch["net_input"]["src_tokens"], batch["net_input"]["src_lengths"], 20, None))
        proposals.append(adapter.propose(tokens, lengths, 3).lprobs)
    exact, int8 = proposals
    assert int8.shape == exact.shape == (3, 3, 12)
    torch.testing.assert_close(int8.exp().sum(-1), torch.ones(3, 3))
    error = (int8.exp() - exact.exp()).abs().max()
    assert 0 < error < 0.05  # int8 is an approximation, a close one


@pytest.mark.skipif(not half_weights_available(), reason="no fbgemm float16 linear")
def test_int8_products_run_small_weights_as_their_fallback():
    """``Int8Linears``: a weight under ``min_elements`` runs as the fallback (here float16-stored weights, rounded:
    exactly the fallback's product, not F.linear's), a larger one in int8 (an approximation of F.linear)."""
    from fairseq_plugins.decoding.linears import Int8Linears

    torch.manual_seed(0)
    small, large = nn.Linear(16, 8), nn.Linear(64, 32)
    x_small, x_large = torch.randn(5, 16), torch.randn(5, 64)
    fallback = HalfWeightLinears(round_weights=True)
    products = Int8Linears(min_elements=16 * 8 + 1, fallback=fallback)
    assert torch.equal(products(small)(x_small), fallback(small)(x_small))
    assert not torch.equal(products(small)(x_small), small(x_small))  # the weights were rounded to float16
    int8 = products(large)(x_large)
    assert not torch.equal(int8, fallback(large)(x_large))
    torch.testing.assert_close(int8, large(x_large), rtol=0, atol=0.05)
    assert list(products.packed) == [(id(large), 0)]  # only the large weight was packed in int8


@pytest.mark.parametrize("capability", ["AVX512", "AVX2"])
def test_drafter_precision_option(monkeypatch, capability):
    """auto, for lossless specdec on a CPU: int8 (its small weights float16-stored, rounded) on an
    AVX-512 CPU or where fbgemm has no float16 product, float16-stored weights (rounded) on other
    x86 CPUs; else float (a float32 cache on a CPU: float16-stored weights where they are float16
    numbers, packed elsewhere); fp16 and int8 refused where they cannot run."""
    from types import SimpleNamespace

    from fairseq_plugins.decoding.linears import Int8Linears, PackedLinears, int8_available, packed_available
    from fairseq_plugins.decoding.specdec import drafter_linear
    from fairseq_plugins_compat.errors import PluginError

    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)

    def chosen(precision, name, model):
        return drafter_linear(SimpleNamespace(drafter_precision=precision), name, model)

    drafter = build_drafter(DICT, seed=1)
    auto = chosen("auto", "specdec", drafter)
    if half_weights_available() and capability == "AVX2":
        assert isinstance(auto, HalfWeightLinears) and auto.round_weights
        assert isinstance(chosen("fp16", "specdec++", drafter), HalfWeightLinears)
    elif int8_available():
        assert isinstance(auto, Int8Linears)
        if half_weights_available():
            assert isinstance(auto.fallback, HalfWeightLinears) and auto.fallback.round_weights
    float32 = HalfWeightLinears if half_weights_available() else PackedLinears if packed_available() else type(None)
    for precision, name in (("auto", "specdec++"), ("float", "specdec")):
        linear = chosen(precision, name, drafter)
        assert isinstance(linear, float32) and not getattr(linear, "round_weights", False)
    assert drafter_linear(SimpleNamespace(drafter_precision="float"), "specdec", drafter.double()) is None
    drafter.float()
    assert isinstance(drafter_linear(SimpleNamespace(drafter_precision="int8"), "specdec++", drafter), Int8Linears)
    drafter.decoder.prefix_causal = False  # no cache: the int8 products run in the cache's layers
    assert drafter_linear(SimpleNamespace(drafter_precision="auto"), "specdec", drafter) is None
    for precision in ("int8", "fp16"):
        with pytest.raises(PluginError, match="needs the drafter cache"):
            drafter_linear(SimpleNamespace(drafter_precision=precision), "specdec", drafter)


def test_a_cpu_without_fbgemm_or_onednn_decodes_with_plain_products(monkeypatch):
    """Where PyTorch has neither fbgemm's float16/int8 products nor oneDNN's packed one (an ARM
    laptop), ``--verifier-matmul auto`` and ``--drafter-precision auto`` fall back to ``F.linear``,
    none of those kernels is called, and the output is still greedy's; asking for fp16 or int8
    drafter products is a one-line error."""
    from types import SimpleNamespace

    from fairseq_plugins.decoding import linears, specdec
    from fairseq_plugins.decoding.builder import verifier_linear
    from fairseq_plugins_compat.errors import PluginError

    for module, name in ((linears, "half_weights_available"), (linears, "packed_available"),
                         (linears, "int8_available"), (specdec, "half_weights_available"),
                         (specdec, "int8_available")):
        monkeypatch.setattr(module, name, lambda: False)

    def missing(*args, **kwargs):
        raise AssertionError("a kernel this PyTorch does not have was called")

    for name in ("fbgemm_pack_gemm_matrix_fp16", "fbgemm_linear_fp16_weight", "quantize_per_channel"):
        monkeypatch.setattr(torch, name, missing)
    verifier = round_to_half(build_verifier(DICT, seed=7))  # float16 numbers: auto would store them as float16
    drafter = build_drafter(DICT, seed=8)
    verifier_products = verifier_linear("auto", verifier, "specdec")
    drafter_products = specdec.drafter_linear(SimpleNamespace(drafter_precision="auto"), "specdec", drafter)
    assert verifier_products is linears.float_linear and drafter_products is linears.float_linear
    for precision in ("fp16", "int8"):
        with pytest.raises(PluginError, match="this PyTorch has no fbgemm"):
            specdec.drafter_linear(SimpleNamespace(drafter_precision=precision), "specdec", drafter)
    batch = make_batch(DICT, [5, 2, 8], seed=3)
    adapter = BlockDrafter(drafter, vocab_limit=9, linear=drafter_products)
    generator = SpeculativeGenerator(verifier, DICT, adapter, SpeculativeConfig(block_size=3, max_len_b=14),
                                     verifier_linear=verifier_products)
    ours = generator.generate([verifier], batch)
    greedy = SequenceGenerator([verifier], DICT, beam_size=1, max_len_b=14).generate([verifier], batch)
    assert adapter.cache.layers is not None  # the lean layers ran, on F.linear
    for out, reference in zip(ours, greedy):
        assert out[0]["tokens"].tolist() == reference[0]["tokens"].tolist()
