"""``--verifier-matmul int8``: int8 products whose every row is computed as if it were alone, so that a
verified block gives, bit for bit, the rows of greedy's one-token steps, and every lossless drafting
decoder's output is greedy's (both with int8 products), token for token, at batch 1 and larger."""
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from drafter_helpers import build_drafter, build_verifier
from fairseq_plugins.decoding import linears
from fairseq_plugins.decoding.builder import verifier_linear
from fairseq_plugins.decoding.core import SpeculativeConfig, SpeculativeGenerator
from fairseq_plugins.decoding.iad import SourceCopyDrafter
from fairseq_plugins.decoding.jacobi import JacobiDrafter
from fairseq_plugins.decoding.linears import RowInt8Linears
from fairseq_plugins.decoding.registry import DECODERS
from fairseq_plugins.decoding.specdec import BlockDrafter
from fairseq_plugins_compat.errors import PluginError
from test_speculative_parity import RandomDrafter, record_block_widths
from tiny_models import make_batch, make_dictionary

pytestmark = pytest.mark.skipif(not linears.row_int8_available(), reason="no fbgemm int8 kernels (x86 CPU)")

DICT = make_dictionary(14)
MAX_LEN = dict(max_len_a=1.2, max_len_b=10)


def rows_of_varied_ranges(m: int, size: int, seed: int) -> torch.Tensor:
    """(m, size) rows whose ranges differ by orders of magnitude, one row all zeros: a quantisation
    range shared by a block would differ from a row's own."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, size, generator=g) * 10 ** torch.empty(m, 1).uniform_(-2, 2, generator=g)
    x[min(3, m - 1)] = 0
    return x


def int8_reference(module: torch.nn.Linear, packed, x: torch.Tensor, levels: int) -> torch.Tensor:
    """The packed int8 weights (per output channel) times each row's own symmetric int8 quantisation,
    summed exactly (float64), plus the bias."""
    weight = torch.ops.quantized.linear_unpack(packed)[0]
    q_weight, weight_scale = weight.int_repr().double(), weight.q_per_channel_scales().double()
    assert q_weight.abs().max() <= 127 and torch.allclose(weight_scale, module.weight.abs().amax(1).double() / 127)
    top = x.double().abs().amax(-1, keepdim=True).clamp(min=1e-30)
    q_x = (x.double() / top * levels).round()
    return (q_x @ q_weight.t()) * weight_scale * top / levels + module.bias.detach().double()


@pytest.mark.parametrize("size_in, size_out", [(32, 48), (256, 1024), (1024, 256)])
def test_a_row_in_a_block_equals_the_row_alone(size_in, size_out):
    """For every block size M, row i of the block's product is the product of row i alone, bit for bit
    (2-D and (T, B, C) inputs); each is the int8 product of the row's own quantisation."""
    torch.manual_seed(size_out)
    module = torch.nn.Linear(size_in, size_out)
    products = RowInt8Linears(min_elements=0)
    linear = products(module)
    x = rows_of_varied_ranges(64, size_in, seed=size_in)
    alone = torch.cat([linear(x[i:i + 1]) for i in range(len(x))])
    for m in list(range(2, 20)) + [33, 64]:
        assert torch.equal(linear(x[:m]), alone[:m]), m
    assert torch.equal(linear(x[:24].view(6, 4, size_in)), alone[:24].view(6, 4, size_out))
    assert torch.equal(linear(x[:24].view(4, 6, size_in).transpose(0, 1)),
                       alone[:24].view(4, 6, size_out).transpose(0, 1))
    torch.testing.assert_close(alone.double(), int8_reference(module, products.packed[id(module), 0][2], x,
                                                              linears.activation_levels()),
                               rtol=1e-5, atol=1e-4)


def test_fbgemm_dynamic_int8_quantises_a_block_with_the_blocks_range():
    """Why the int8 verifier quantises per row: fbgemm's dynamic product (``Int8Linears``, the drafter's
    ``--drafter-precision int8``) computes a row in a block otherwise than alone."""
    module = torch.nn.Linear(256, 1024)
    x = rows_of_varied_ranges(8, 256, seed=0)
    dynamic = linears.Int8Linears(min_elements=0)(module)
    assert not torch.equal(dynamic(x)[:1], dynamic(x[:1]))


def test_small_weights_are_stored_as_float16_and_also_computed_row_by_row():
    """Weights under ``min_elements`` run on float16-stored weights (fbgemm), whose block rows are the
    rows alone too; the others in int8.  A weight changed in place is packed again; ``forget`` drops all."""
    torch.manual_seed(0)
    small, large = torch.nn.Linear(32, 48), torch.nn.Linear(64, 96)
    products = RowInt8Linears(min_elements=64 * 96)
    for module in (small, large):
        linear = products(module)
        x = rows_of_varied_ranges(12, module.in_features, seed=1)
        assert torch.equal(linear(x), torch.cat([linear(x[i:i + 1]) for i in range(12)]))
        torch.testing.assert_close(linear(x), F.linear(x, module.weight, module.bias), rtol=0.05,
                                   atol=0.05 * float(x.abs().max()))
    assert [key[0] for key in products.packed] == [id(large)]
    assert [key[0] for key in products.half.halves] == [id(small)]
    x = torch.randn(3, 64)
    with torch.no_grad():
        large.weight.mul_(-1)
    torch.testing.assert_close(products(large)(x), F.linear(x, large.weight, large.bias), rtol=0.05, atol=0.1)
    products.forget()
    assert not products.packed and not products.half.halves


def test_int8_option_builds_the_row_products_or_says_why_not():
    """``--verifier-matmul int8`` is a choice of every speculative decoder; a float32 CPU verifier gets
    ``RowInt8Linears``, any other verifier a one-line error."""
    verifier = build_verifier(DICT, seed=0)
    assert isinstance(verifier_linear("int8", verifier), RowInt8Linears)
    for name in ("greedy", "specdec", "iad", "jacobi", "gs-jacobi"):
        assert DECODERS[name].options(verifier_matmul="int8").verifier_matmul == "int8"
    with pytest.raises(PluginError, match="int8 runs a float32 verifier on a CPU; this one is float64 on cpu"):
        verifier_linear("int8", verifier.double(), "specdec")


def registered_greedy(verifier, batch, verifier_matmul="int8"):
    """The registered ``greedy`` decoder with ``--verifier-matmul verifier_matmul``: (token lists, its products)."""
    entry = DECODERS["greedy"]
    task, args = SimpleNamespace(target_dictionary=DICT), SimpleNamespace(beam=1, **MAX_LEN)
    generator = entry.build(task, [verifier], args, entry.options(verifier_matmul=verifier_matmul))
    return [h[0]["tokens"].tolist() for h in generator.generate([verifier], batch)], generator.verifier_linear


DRAFTERS = {  # name -> (drafter for a seed, block size)
    "random": (lambda seed: RandomDrafter(seed, len(DICT)), 4),
    "specdec": (lambda seed: BlockDrafter(build_drafter(DICT, seed=seed + 1)), 3),
    "iad": (lambda seed: SourceCopyDrafter(DICT.pad(), 1), 64),
    "gs-jacobi": (lambda seed: JacobiDrafter(DICT.pad(), DICT.pad(), block=3), 3),
}


@pytest.mark.parametrize("min_elements", [0, None], ids=["all-int8", "default-threshold"])
@pytest.mark.parametrize("src_lengths", [[7], [5, 2, 9, 1, 6]], ids=["b1", "b5"])
@pytest.mark.parametrize("seed", range(3))
def test_drafting_decoders_give_int8_greedys_output(monkeypatch, seed, src_lengths, min_elements):
    """specdec, iad, gs-jacobi and a random drafter with int8 products == greedy with int8 products, token for
    token (the tiny verifier's weights are all under the default size: ``all-int8`` runs them in int8,
    ``default-threshold`` through the int8 mode's float16 fallback)."""
    if min_elements is not None:
        monkeypatch.setattr(linears, "ROW_INT8_MIN_ELEMENTS", min_elements)
    verifier = build_verifier(DICT, seed=seed)
    batch = make_batch(DICT, src_lengths, seed=seed)
    reference, greedy_products = registered_greedy(verifier, batch)
    assert bool(greedy_products.packed) == (min_elements == 0)  # int8 products ran
    assert_drafters_give(reference, verifier, batch, seed, "int8")


def assert_drafters_give(reference, verifier, batch, seed, verifier_matmul):
    """Every drafter of :data:`DRAFTERS` with ``--verifier-matmul verifier_matmul`` outputs ``reference`` (token
    lists) on ``batch``, having verified drafts in blocks."""
    for name, (drafter, block_size) in DRAFTERS.items():
        generator = SpeculativeGenerator(verifier, DICT, drafter(seed), SpeculativeConfig(block_size=block_size,
                                                                                          **MAX_LEN),
                                         verifier_linear=verifier_linear(verifier_matmul, verifier))
        widths = record_block_widths(generator)
        ours = [h[0]["tokens"].tolist() for h in generator.generate([verifier], batch)]
        assert ours == reference, name
        assert max(widths) > 1, name  # drafts were verified in blocks
