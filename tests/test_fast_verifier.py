"""The verifier's lean block forward (fast_decoder.py) against fairseq's own layers.

Both ``VerifierCache`` implementations are driven with the same random ragged blocks,
rollbacks and leaving rows; they must give the same log-probabilities.
"""
import argparse

import pytest
import torch
from fairseq.models.transformer import TransformerModel, base_architecture
from fairseq.sequence_generator import SequenceGenerator

from fairseq_plugins.decoding.core import SpeculativeConfig, SpeculativeGenerator
from fairseq_plugins.decoding.linears import (HalfWeightLinears, Int8Linears, PackedLinears, float_linear,
                                             half_weights_available, int8_available, packed_available)
from fairseq_plugins.decoding.incremental import VerifierCache
from tiny_models import DictTask, build_transformer, make_batch, make_dictionary, round_to_half
from test_speculative_parity import RandomDrafter

DICT = make_dictionary(30)


def build_model(seed=0, dtype=torch.float32, half_numbers=True, **options):
    """A random 2-layer transformer, its weights float16 numbers (:func:`round_to_half`) unless
    ``half_numbers`` is false; ``options`` are fairseq architecture arguments."""
    args = argparse.Namespace(
        encoder_layers=2, decoder_layers=2, encoder_embed_dim=16, decoder_embed_dim=16,
        encoder_ffn_embed_dim=32, decoder_ffn_embed_dim=32, encoder_attention_heads=2,
        decoder_attention_heads=2, share_all_embeddings=True, dropout=0.0,
        max_source_positions=64, max_target_positions=64, **options,
    )
    base_architecture(args)
    torch.manual_seed(seed)
    model = TransformerModel.build_model(args, DictTask(DICT))
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3) if p.dim() == 1 else p.normal_(0, 16 ** -0.5)
    return (round_to_half(model) if half_numbers else model).to(dtype).eval()


LINEARS = [pytest.param(float_linear, id="F.linear"),
           pytest.param(PackedLinears(min_elements=0), id="packed",
                        marks=pytest.mark.skipif(not packed_available(), reason="no oneDNN packed linear")),
           pytest.param(HalfWeightLinears(), id="half-weights",
                        marks=pytest.mark.skipif(not half_weights_available(), reason="no fbgemm float16 linear"))]


def drive_both(model, seed, lengths=(5, 2, 9), iterations=8, max_block=5, linear=float_linear):
    """Feed the same random blocks to a fast cache (its products run by ``linear``) and a
    fallback cache; rows leave at random.
    Returns the list of (fast lprobs, fast hidden, fallback lprobs, fallback hidden)."""
    batch = make_batch(DICT, list(lengths), seed=seed)["net_input"]
    encoder_out = model.encoder(batch["src_tokens"], src_lengths=batch["src_lengths"])
    fast = VerifierCache(model, encoder_out, len(lengths), "cpu", linear=linear)
    slow = VerifierCache(model, encoder_out, len(lengths), "cpu", fast=False)
    assert fast.fast and not slow.fast
    g = torch.Generator().manual_seed(seed)
    outputs = []
    with torch.no_grad():
        for _ in range(iterations):
            bsz = int(fast.valid.numel())
            m = int(torch.randint(1, max_block + 1, (1,), generator=g))
            tokens = torch.randint(DICT.nspecial, len(DICT), (bsz, m), generator=g)
            outputs.append(fast.forward_block(tokens) + slow.forward_block(tokens))
            kept = torch.randint(0, m + 1, (bsz,), generator=g)
            fast.rollback(kept)
            slow.rollback(kept)
            assert fast.valid.tolist() == slow.valid.tolist()
            if bsz > 1 and bool(torch.rand(1, generator=g) < 0.4):
                rows = torch.randperm(bsz, generator=g)[: bsz - 1].sort().values
                fast.keep_rows(rows)
                slow.keep_rows(rows)
    return outputs


def assert_same(outputs):
    for fast_lprobs, fast_hidden, slow_lprobs, slow_hidden in outputs:
        assert fast_lprobs.dtype == torch.float32 and fast_lprobs.shape == slow_lprobs.shape
        torch.testing.assert_close(fast_lprobs, slow_lprobs, rtol=0, atol=1e-6)
        torch.testing.assert_close(fast_hidden, slow_hidden, rtol=0, atol=1e-6)
        assert torch.equal(fast_lprobs.argmax(-1), slow_lprobs.argmax(-1))


@pytest.mark.parametrize("options", [
    {},
    {"decoder_normalize_before": True, "encoder_normalize_before": True},
    {"decoder_learned_pos": True, "encoder_learned_pos": True},
    {"layernorm_embedding": True, "decoder_normalize_before": True, "activation_fn": "gelu"},
    {"no_scale_embedding": True, "decoder_output_dim": 16, "decoder_input_dim": 16},
], ids=["post-norm", "pre-norm", "learned-pos", "layernorm-embedding-gelu", "no-scale"])
@pytest.mark.parametrize("linear", LINEARS)
def test_fast_path_matches_fairseq_layers(options, linear):
    for seed in range(3):
        assert_same(drive_both(build_model(seed, **options), seed, linear=linear))


@pytest.mark.parametrize("linear", LINEARS)
def test_single_row_and_one_token_blocks(linear):
    assert_same(drive_both(build_model(1), seed=1, lengths=(7,), iterations=12, max_block=1, linear=linear))


@pytest.mark.skipif(not packed_available(), reason="no oneDNN packed linear")
def test_packed_linear_is_the_float32_projection():
    """One row: F.linear itself (fairseq's one-token numbers); blocks: float32 to rounding;
    a weight changed in place is packed again; a float64 weight keeps F.linear."""
    torch.manual_seed(0)
    module, linears = torch.nn.Linear(24, 40), PackedLinears()
    for rows in (0, 7):
        linear = linears(module, rows)
        out = rows or 40
        weight, bias = module.weight[:out], module.bias[:out]
        one = torch.randn(1, 1, 24)
        assert torch.equal(linear(one), torch.nn.functional.linear(one, weight, bias))
        for shape in ((5, 24), (3, 4, 24), (1, 6, 24)):
            x = torch.randn(*shape)
            assert linear(x).shape == (*shape[:-1], out)
            torch.testing.assert_close(linear(x), torch.nn.functional.linear(x, weight, bias), rtol=1e-5, atol=1e-5)
    x = torch.randn(3, 24)
    with torch.no_grad():
        module.weight.mul_(-2.0)
    torch.testing.assert_close(linears(module)(x), torch.nn.functional.linear(x, module.weight, module.bias),
                               rtol=1e-5, atol=1e-5)
    double = torch.nn.Linear(24, 4).double()
    assert torch.equal(linears(double)(x.double()), torch.nn.functional.linear(x.double(), double.weight, double.bias))


@pytest.mark.skipif(not (packed_available() and int8_available()), reason="no oneDNN packed or fbgemm int8 linear")
def test_small_weights_keep_f_linear(monkeypatch):
    """Below ``min_elements`` (default linears.SMALL_WEIGHT) a projection runs F.linear,
    fairseq's own numbers, in PackedLinears and Int8Linears alike; larger weights are packed."""
    torch.manual_seed(0)
    small, large = torch.nn.Linear(64, 32), torch.nn.Linear(64, 48)
    x = torch.randn(7, 64)
    monkeypatch.setattr("fairseq_plugins.decoding.linears.SMALL_WEIGHT", 64 * 40)
    for linears in (PackedLinears(), Int8Linears()):
        assert torch.equal(linears(small)(x), torch.nn.functional.linear(x, small.weight, small.bias))
        torch.testing.assert_close(linears(large)(x), torch.nn.functional.linear(x, large.weight, large.bias),
                                   rtol=0.05, atol=0.05)  # int8: within quantisation error
        assert [module for module, *_ in linears.packed.values()] == [large]


def test_double_precision_is_exact_enough():
    """In double precision float32 rounding cannot hide a wrong mask or position: the states
    agree to fairseq's attention softmax, which fairseq runs in float32 even for a double
    model (the lean layers' fused attention runs it in double: ~1e-8 apart), and the
    log-probs, rounded to float32 by both, to one float32 step."""
    outputs = drive_both(build_model(2, dtype=torch.float64, half_numbers=False), seed=2)
    for fast_lprobs, fast_hidden, slow_lprobs, slow_hidden in outputs:
        assert fast_hidden.dtype == torch.float64
        torch.testing.assert_close(fast_hidden, slow_hidden, rtol=0, atol=1e-7)
        torch.testing.assert_close(fast_lprobs, slow_lprobs, rtol=0, atol=1e-6)


def test_the_comparison_can_fail():
    """A corrupted fast cache is noticed: the drive compares real numbers."""
    model = build_model(0)
    batch = make_batch(DICT, [4, 6], seed=0)["net_input"]
    encoder_out = model.encoder(batch["src_tokens"], src_lengths=batch["src_lengths"])
    fast, slow = VerifierCache(model, encoder_out, 2, "cpu"), VerifierCache(model, encoder_out, 2, "cpu", fast=False)
    tokens = torch.tensor([[5, 6, 7], [8, 9, 10]])
    with torch.no_grad():
        for cache in (fast, slow):
            cache.forward_block(tokens)
            cache.rollback(torch.tensor([3, 2]))
        fast.layers.layers[0].value[0, :, 1] += 10.0  # row 0, slot 1: a kept token
        assert not torch.allclose(fast.forward_block(tokens[:, :2])[0], slow.forward_block(tokens[:, :2])[0], atol=1e-3)


@pytest.mark.parametrize("options,reason", [
    ({"decoder_layerdrop": 0.1}, "layerdrop"),
    ({"quant_noise_pq": 0.1, "quant_noise_pq_block_size": 8}, "quant noise"),
])
def test_unsupported_configuration_falls_back(options, reason):
    model = build_model(0, **options)
    batch = make_batch(DICT, [3], seed=0)["net_input"]
    encoder_out = model.encoder(batch["src_tokens"], src_lengths=batch["src_lengths"])
    cache = VerifierCache(model, encoder_out, 1, "cpu")
    assert not cache.fast
    from fairseq_plugins.decoding.fast_decoder import fast_path_problems
    assert reason in fast_path_problems(model.decoder)
    with torch.no_grad():
        lprobs, _ = cache.forward_block(torch.tensor([[DICT.eos(), 5]]))
    assert lprobs.shape == (1, 2, len(DICT))


@pytest.mark.parametrize("linear", LINEARS)
def test_float32_generation_matches_fairseq_greedy(linear):
    for seed in range(4):
        model = round_to_half(build_transformer(DICT, seed=seed, eos_boost=1.0, dtype=torch.float32))
        batch = make_batch(DICT, [5, 2, 9, 4], seed=seed)
        reference = SequenceGenerator([model], DICT, beam_size=1, max_len_b=20).generate([model], batch)
        generator = SpeculativeGenerator(model, DICT, RandomDrafter(seed, len(DICT)),
                                         SpeculativeConfig(block_size=4, max_len_b=20), verifier_linear=linear)
        ours = generator.generate([model], batch)
        for ref, out in zip(reference, ours):
            assert out[0]["tokens"].tolist() == ref[0]["tokens"].tolist()
            torch.testing.assert_close(out[0]["positional_scores"], ref[0]["positional_scores"], rtol=0, atol=1e-5)


def test_verifier_matmul_option_chooses_the_products():
    """``--verifier-matmul``: auto stores a float32 CPU verifier's float16-number weights as
    float16 (when fbgemm is there), packed packs them all, plain and other dtypes keep
    F.linear; every speculative decoder has the option."""
    from fairseq_plugins.decoding.builder import verifier_linear
    from fairseq_plugins.decoding.registry import DECODERS

    model = build_model(0)
    assert verifier_linear("plain", model) is float_linear
    assert verifier_linear("auto", model.double()) is float_linear
    auto, packed = verifier_linear("auto", model.float()), verifier_linear("packed", model)
    assert isinstance(auto, HalfWeightLinears) if half_weights_available() else not isinstance(auto, HalfWeightLinears)
    assert isinstance(packed, PackedLinears) if packed_available() else packed is float_linear
    for name in ("specdec", "specdec++", "iad", "jacobi", "gs-jacobi", "hybrid-jacobi"):
        assert "verifier_matmul" in DECODERS[name].option_names()


@pytest.mark.skipif(not half_weights_available(), reason="no fbgemm float16 linear")
def test_half_weights_only_for_float16_numbers():
    """A weight whose elements are float16 numbers is stored as float16, and its product is
    F.linear's to float32 rounding at any number of rows (one included); any other weight,
    and weights under ``min_elements``, run as the fallback (here F.linear itself); a weight
    changed in place is packed again, ``round_weights`` rounds the others instead, and ``forget``
    drops every packed weight."""
    torch.manual_seed(0)
    exact, inexact = round_to_half(torch.nn.Linear(24, 40)), torch.nn.Linear(24, 40)
    linears = HalfWeightLinears(fallback=float_linear)
    for shape in ((1, 24), (1, 1, 24), (5, 24), (3, 4, 24)):
        x = torch.randn(*shape)
        torch.testing.assert_close(linears(exact)(x), torch.nn.functional.linear(x, exact.weight, exact.bias),
                                   rtol=0, atol=1e-6)
        torch.testing.assert_close(linears(exact, 7)(x), torch.nn.functional.linear(x, exact.weight[:7],
                                                                                   exact.bias[:7]), rtol=0, atol=1e-6)
        assert torch.equal(linears(inexact)(x), torch.nn.functional.linear(x, inexact.weight, inexact.bias))
    stored = {key: halves[2] is not None for key, halves in linears.halves.items()}
    assert stored == {(id(exact), 0): True, (id(exact), 7): True, (id(inexact), 0): False}
    with torch.no_grad():
        exact.weight.mul_(-2.0)  # still float16 numbers
    x = torch.randn(3, 24)
    torch.testing.assert_close(linears(exact)(x), torch.nn.functional.linear(x, exact.weight, exact.bias),
                               rtol=0, atol=1e-6)
    rounding = HalfWeightLinears(round_weights=True)
    torch.testing.assert_close(rounding(inexact)(x), torch.nn.functional.linear(x, inexact.weight.half().float(),
                                                                               inexact.bias), rtol=0, atol=1e-6)
    assert not torch.allclose(rounding(inexact)(x), linears(inexact)(x), rtol=0, atol=1e-6)
    huge = torch.nn.Linear(24, 40)
    with torch.no_grad():
        huge.weight[0, 0] = 1e6  # beyond float16's range: not rounded to infinity, left to the fallback
    torch.testing.assert_close(rounding(huge)(x), torch.nn.functional.linear(x, huge.weight, huge.bias))
    assert rounding.halves[(id(huge), 0)][2] is None
    big_only = HalfWeightLinears(min_elements=24 * 41, fallback=float_linear)
    assert torch.equal(big_only(exact)(x), torch.nn.functional.linear(x, exact.weight, exact.bias))
    assert not big_only.halves
    linears.forget()
    assert not linears.halves


@pytest.mark.skipif(not packed_available(), reason="no oneDNN packed linear")
def test_eval_bleu_generator_packs_the_weights_of_each_validation(tmp_path):
    """``--task speculative_translation --decoding iad --eval-bleu``: the validation generator,
    built with the model, repacks the verifier on every generate (an optimizer step changes the
    weights through ``.data``, which no version stamp sees); it then decodes as a fresh one."""
    from fairseq import tasks
    from omegaconf import OmegaConf

    dictionary = make_dictionary()
    for lang in ("src", "tgt"):
        dictionary.save(str(tmp_path / f"dict.{lang}.txt"))
    task = tasks.setup_task(OmegaConf.create({
        "_name": "speculative_translation", "data": str(tmp_path), "source_lang": "src", "target_lang": "tgt",
        "decoding": "iad", "eval_bleu": True, "eval_bleu_detok": "space", "eval_bleu_args": '{"max_len_b": 12}'}))
    args = argparse.Namespace(arch="transformer", encoder_layers=2, decoder_layers=2, encoder_embed_dim=32,
                              decoder_embed_dim=32, encoder_ffn_embed_dim=64, decoder_ffn_embed_dim=64,
                              encoder_attention_heads=2, decoder_attention_heads=2, share_all_embeddings=True,
                              dropout=0.0, max_source_positions=64, max_target_positions=64)
    base_architecture(args)
    torch.manual_seed(0)
    model = round_to_half(task.build_model(args).float().eval())  # float16 numbers: HalfWeightLinears stores them
    validation = task.sequence_generator
    assert validation.repack and isinstance(validation.verifier_linear, (PackedLinears, HalfWeightLinears))
    sample = make_batch(task.target_dictionary, [5, 7, 6, 4])
    validation.generate([model], sample)  # packs the weights as they are now
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.data.add_(torch.randn_like(parameter), alpha=0.5)  # as an optimizer step does
            parameter.data.copy_(parameter.data.half().float())  # as one with --fp16 weights would
    fresh = task.build_generator([model], argparse.Namespace(max_len_b=12))
    expected = [hyps[0]["tokens"].tolist() for hyps in fresh.generate([model], sample)]
    assert [hyps[0]["tokens"].tolist() for hyps in validation.generate([model], sample)] == expected


@pytest.mark.skipif(not (packed_available() and half_weights_available()), reason="no oneDNN or fbgemm float16 product")
def test_weights_made_in_inference_mode_are_packed_too():
    """A model loaded inside torch.inference_mode has inference tensors, which keep no version
    counter: the packed and float16-stored products still take them (they failed with "Inference
    tensors do not track version counter"), inside and outside inference mode."""
    with torch.inference_mode():
        module = torch.nn.Linear(64, 2 ** 11)
        module.weight.copy_(module.weight.half().float())  # float16 numbers: HalfWeightLinears takes it
    assert module.weight.is_inference()
    x = torch.randn(3, 64)
    expected = torch.nn.functional.linear(x, module.weight, module.bias)
    for linears in (PackedLinears(), HalfWeightLinears()):
        torch.testing.assert_close(linears(module)(x), expected, rtol=1e-5, atol=1e-5)
        with torch.inference_mode():
            torch.testing.assert_close(linears(module)(x), expected, rtol=1e-5, atol=1e-5)


def test_lean_layers_are_built_once_and_again_after_any_change():
    """The generator's ``BuiltOnce`` keeps a decoder's lean layers from one batch to the next,
    and builds them again when a weight changes in place, a parameter or a submodule is
    replaced or added, or the decoder leaves eval mode (then there are none: fairseq's layers run)."""
    from fairseq_plugins.decoding.built_once import BuiltOnce
    from fairseq_plugins.decoding.fast_decoder import lean_layers

    model, built = build_model(0), BuiltOnce()
    decoder = model.decoder
    first = lean_layers(decoder, float_linear, built)
    assert first is not None and lean_layers(decoder, float_linear, built) is first
    assert lean_layers(decoder, PackedLinears(), built) is not first  # another product factory: its own
    changes = [
        lambda: decoder.layers[0].fc1.weight.mul_(2.0),
        lambda: setattr(decoder.layers[1].final_layer_norm, "weight", torch.nn.Parameter(torch.ones(16))),
        lambda: setattr(decoder.layers[0], "fc2", torch.nn.Linear(32, 16)),
        lambda: decoder.layers[1].register_parameter("extra", torch.nn.Parameter(torch.ones(2))),
    ]
    previous = first
    for change in changes:
        with torch.no_grad():
            change()
        rebuilt = lean_layers(decoder, float_linear, built)
        assert rebuilt is not previous and lean_layers(decoder, float_linear, built) is rebuilt
        previous = rebuilt
    assert lean_layers(decoder.train(), float_linear, built) is None
    assert lean_layers(decoder.eval(), float_linear, built) is not None


@pytest.mark.parametrize("linear", LINEARS)
def test_a_changed_verifier_decodes_as_a_fresh_one(linear):
    """A generator reuses its verifier's lean layers and fast encoder across batches: after the
    model's weights are loaded anew (in place) or one of its layers replaced, it must decode as
    fairseq's greedy search does with the changed model, never with what it built before."""
    model, other = build_model(0), build_model(1)
    batch = make_batch(DICT, [5, 2, 9, 4], seed=0)
    generator = SpeculativeGenerator(model, DICT, RandomDrafter(0, len(DICT)),
                                     SpeculativeConfig(block_size=4, max_len_b=20), verifier_linear=linear)

    def check():
        reference = SequenceGenerator([model], DICT, beam_size=1, max_len_b=20).generate([model], batch)
        for ours, ref in zip(generator.generate([model], batch), reference):
            assert ours[0]["tokens"].tolist() == ref[0]["tokens"].tolist()
            torch.testing.assert_close(ours[0]["positional_scores"], ref[0]["positional_scores"], rtol=0, atol=1e-5)
        return [h[0]["tokens"].tolist() for h in reference]

    before = check()
    model.load_state_dict(other.state_dict())
    assert check() != before
    model.decoder.layers[1].fc2 = torch.nn.Linear(32, 16)
    with torch.no_grad():
        model.decoder.layers[1].fc2.weight.copy_(round_to_half(torch.nn.Linear(32, 16)).weight * 3)
    model.encoder.layers[0].fc1 = round_to_half(torch.nn.Linear(16, 32))
    check()
