"""The lean encoder forward (fast_encoder.py) against fairseq's own encoder: the same output
dict, the same numbers to float32 rounding, over ragged (padded) batches and architecture
options; unusual encoders keep fairseq's forward.  (Decoding with it: the packed-product
parity tests of test_fast_verifier.py, whose generator encodes with it.)"""
import pytest
import torch

from fairseq_plugins.decoding.linears import PackedLinears, float_linear
from fairseq_plugins.decoding.fast_encoder import FastEncoder, encoder_function, fast_encoder_problems
from test_fast_verifier import DICT, LINEARS, build_model
from tiny_models import make_batch

OPTIONS = {
    "post-norm": {},
    "pre-norm": {"decoder_normalize_before": True, "encoder_normalize_before": True},
    "learned-pos": {"decoder_learned_pos": True, "encoder_learned_pos": True},
    "layernorm-embedding-gelu": {"layernorm_embedding": True, "encoder_normalize_before": True, "activation_fn": "gelu"},
    "no-scale": {"no_scale_embedding": True},
}


@pytest.mark.parametrize("options", list(OPTIONS.values()), ids=list(OPTIONS))
@pytest.mark.parametrize("linear", LINEARS)
def test_fast_encoder_matches_fairseq(options, linear):
    for seed in range(3):
        model = build_model(seed, **options)
        assert fast_encoder_problems(model.encoder) == []
        for lengths in ([6], [5, 2, 9], [1, 7, 7, 3]):
            net_input = make_batch(DICT, lengths, seed=seed)["net_input"]
            with torch.no_grad():
                expected = model.encoder(net_input["src_tokens"], src_lengths=net_input["src_lengths"])
                got = FastEncoder(model.encoder, linear)(net_input["src_tokens"], src_lengths=net_input["src_lengths"])
            assert sorted(got) == sorted(expected)
            padding = expected["encoder_padding_mask"][0]
            assert torch.equal(got["encoder_padding_mask"][0], padding)
            assert torch.equal(got["src_lengths"][0], expected["src_lengths"][0])
            torch.testing.assert_close(got["encoder_embedding"][0], expected["encoder_embedding"][0], rtol=0, atol=0)
            real = ~padding.t().unsqueeze(-1)  # (S, B, 1): what the decoder reads
            torch.testing.assert_close(got["encoder_out"][0] * real, expected["encoder_out"][0] * real,
                                       rtol=0, atol=1e-5)


def test_the_comparison_can_fail():
    model = build_model(0)
    net_input = make_batch(DICT, [5, 3], seed=0)["net_input"]
    fast = FastEncoder(model.encoder, float_linear)
    fast.layers[1].normalize_before = True  # a wrong layer order is noticed
    with torch.no_grad():
        expected = model.encoder(net_input["src_tokens"], src_lengths=net_input["src_lengths"])["encoder_out"][0]
        got = fast(net_input["src_tokens"], src_lengths=net_input["src_lengths"])["encoder_out"][0]
    assert not torch.allclose(got, expected, atol=1e-3)


def test_unusual_encoders_keep_fairseq_forward():
    model = build_model(0, encoder_layerdrop=0.1)
    assert fast_encoder_problems(model.encoder) == ["layerdrop"]
    assert encoder_function(model.encoder, PackedLinears()) is model.encoder
    plain = build_model(0)
    assert encoder_function(plain.encoder, float_linear) is plain.encoder  # plain products: fairseq's own encoder
    assert isinstance(encoder_function(plain.encoder, PackedLinears()), FastEncoder)
    assert fast_encoder_problems(plain.encoder.train()) == ["training mode"]
