"""``--verifier-matmul bf16``: bfloat16 products (oneDNN) whose every row is computed as if it were alone, so
that a verified block gives, bit for bit, the products of greedy's one-token steps, and every lossless drafting
decoder's output is greedy's (both with bfloat16 products), token for token, at batch 1 and larger; the output
layer keeps float32 logits."""
import pytest
import torch
import torch.nn.functional as F

from drafter_helpers import build_verifier
from fairseq_plugins.bench.arithmetic import BFLOAT16, products
from fairseq_plugins.decoding import linears
from fairseq_plugins.decoding.builder import verifier_linear
from fairseq_plugins.decoding.linears import Bfloat16Linears, HalfWeightLinears
from fairseq_plugins.decoding.registry import DECODERS
from fairseq_plugins_compat.errors import PluginError
from test_int8_verifier import DICT, assert_drafters_give, registered_greedy, rows_of_varied_ranges
from tiny_models import make_batch

pytestmark = pytest.mark.skipif(not linears.bfloat16_available(), reason="no oneDNN bfloat16 kernels")


def bfloat16_reference(module: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """The product of the bfloat16-rounded inputs and weights, summed in float64, plus the rounded bias."""
    rounded = [t.detach().bfloat16().double() for t in (x, module.weight, module.bias)]
    return F.linear(*rounded)


@pytest.mark.parametrize("size_in, size_out", [(32, 48), (256, 1024), (1024, 256)])
def test_a_row_in_a_block_equals_the_row_alone(size_in, size_out):
    """For every block size M, row i of the block's product is the product of row i alone, bit for bit
    (2-D and (T, B, C) inputs), a bfloat16 rounding of the bfloat16 numbers' exact product."""
    torch.manual_seed(size_out)
    module = torch.nn.Linear(size_in, size_out)
    linear = Bfloat16Linears()(module)
    x = rows_of_varied_ranges(64, size_in, seed=size_in)
    alone = torch.cat([linear(x[i:i + 1]) for i in range(len(x))])
    assert alone.dtype == torch.float32
    for m in list(range(2, 20)) + [33, 64]:
        assert torch.equal(linear(x[:m]), alone[:m]), m
    assert torch.equal(linear(x[:24].view(6, 4, size_in)), alone[:24].view(6, 4, size_out))
    assert torch.equal(linear(x[:24].view(4, 6, size_in).transpose(0, 1)),
                       alone[:24].view(4, 6, size_out).transpose(0, 1))
    reference = bfloat16_reference(module, x)
    torch.testing.assert_close(alone.double(), reference, rtol=2 ** -7, atol=1e-3 * float(reference.abs().max()))


def test_float_modules_run_as_the_fallback_and_changed_weights_are_packed_again():
    """The output layer (``float_modules``) runs as the fallback; a weight changed in place is packed
    again; ``forget`` drops every pack, the fallback's too."""
    torch.manual_seed(0)
    hidden, output = torch.nn.Linear(64, 96), torch.nn.Linear(96, 40)
    with torch.no_grad():
        output.weight.copy_(output.weight.half().float())
        output.bias.copy_(output.bias.half().float())
    factory = Bfloat16Linears([output], HalfWeightLinears())
    x = torch.randn(5, 64)
    y = factory(hidden)(x)
    torch.testing.assert_close(factory(output)(y), F.linear(y, output.weight, output.bias))
    assert [key[0] for key in factory.packed] == [id(hidden)]
    assert [key[0] for key in factory.fallback.halves] == [id(output)]
    with torch.no_grad():
        hidden.weight.mul_(-1)
    torch.testing.assert_close(factory(hidden)(x), -y + 2 * hidden.bias.bfloat16().float(), rtol=0.02, atol=0.02)
    factory.forget()
    assert not factory.packed and not factory.fallback.halves


def test_bf16_option_builds_the_products_or_says_why_not(monkeypatch):
    """``--verifier-matmul bf16`` is a choice of every speculative decoder; a float32 CPU verifier gets
    ``Bfloat16Linears`` with its output layer kept apart, any other verifier or a CPU without the kernels a
    one-line error."""
    verifier = build_verifier(DICT, seed=0)
    factory = verifier_linear("bf16", verifier)
    assert isinstance(factory, Bfloat16Linears) and factory.float_ids == {id(verifier.decoder.output_projection)}
    for name in ("greedy", "specdec", "iad", "jacobi", "gs-jacobi"):
        assert DECODERS[name].options(verifier_matmul="bf16").verifier_matmul == "bf16"
    with pytest.raises(PluginError, match="bf16 runs a float32 verifier on a CPU; this one is float64 on cpu"):
        verifier_linear("bf16", build_verifier(DICT, seed=0).double(), "specdec")
    monkeypatch.setattr(linears, "bfloat16_available", lambda: False)
    with pytest.raises(PluginError, match="bf16 needs oneDNN's bfloat16 kernels"):
        verifier_linear("bf16", verifier, "greedy")


@pytest.mark.parametrize("src_lengths", [[7], [5, 2, 9, 1, 6]], ids=["b1", "b5"])
@pytest.mark.parametrize("seed", range(3))
def test_drafting_decoders_give_bfloat16_greedys_output(seed, src_lengths):
    """specdec, iad, gs-jacobi and a random drafter with bfloat16 products == greedy with bfloat16 products,
    token for token; the harness names the rows' arithmetic."""
    verifier = build_verifier(DICT, seed=seed)
    batch = make_batch(DICT, src_lengths, seed=seed)
    reference, greedy_products = registered_greedy(verifier, batch, "bf16")
    assert greedy_products.packed  # bfloat16 products ran
    assert products(greedy_products, verifier).startswith(f"{BFLOAT16} (output layer: ")
    assert_drafters_give(reference, verifier, batch, seed, "bf16")
