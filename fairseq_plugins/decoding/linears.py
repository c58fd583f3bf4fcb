"""How a fast layer runs an ``nn.Linear``: the projection as a plain function x (..., in) -> (..., out).

- :func:`float_linear`: ``F.linear``, as fairseq;
- :class:`PackedLinears`: float32 weights packed once into oneDNN's blocked layout (CPU);
- :class:`HalfWeightLinears`: float32 products of weights stored as float16 (fbgemm, x86 CPU), for weights
  whose every element is a float16 number;
- :class:`Int8Linears`: int8 weights and dynamically quantised inputs (fbgemm, CPU);
- :class:`RowInt8Linears`: int8 weights and inputs quantised row by row, so that a row's product does
  not depend on the other rows (fbgemm, x86 CPU);
- :class:`Bfloat16Linears`: bfloat16 weights and inputs, float32 sums (oneDNN: AMX or AVX512-BF16 on x86);
- :func:`packed_or_plain`, :func:`float32_linears`: the best of these this PyTorch has;
- :func:`packed_linears`: every ``nn.Linear`` of whole models run by one of them, for fairseq's own search.
"""
import contextlib
import functools
import warnings
from typing import Callable, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

Linear = Callable[[Tensor], Tensor]  # x (..., in) -> (..., out)


def _first_rows(module: nn.Linear, rows: int) -> Tuple[Tensor, Optional[Tensor]]:
    """(weight, bias) of the projection, read once (``module.weight`` goes through
    nn.Module.__getattr__); ``rows`` > 0: only the first ``rows`` outputs."""
    weight, bias = module.weight, module.bias
    if rows:
        weight, bias = weight[:rows], None if bias is None else bias[:rows]
    return weight, bias


def float_linear(module: nn.Linear, rows: int = 0) -> Linear:
    """The projection as a plain function (``rows`` > 0: only its first ``rows`` outputs)."""
    weight, bias = _first_rows(module, rows)
    return lambda x: F.linear(x, weight, bias)


def weight_stamp(weight: Tensor) -> Tuple[Optional[int], int]:
    """What tells a pack that its weight changed as a tensor: the version counter and the data
    pointer.  A model loaded inside ``torch.inference_mode`` has inference tensors, which keep
    no version counter (and cannot change outside inference mode): their data pointer only."""
    return (None if weight.is_inference() else weight._version), weight.data_ptr()


def packed_once(packs: dict, module: nn.Linear, rows: int, weight: Tensor, pack: Callable[[], object]):
    """``pack()`` for ``module``'s first ``rows`` outputs (``weight``), made on the first call and again only when
    the weight changed as a tensor (:func:`weight_stamp`).  ``packs``: (id(module), rows) -> (module, stamp, pack);
    it holds the module, so that its id is not reused."""
    key, stamp = (id(module), rows), weight_stamp(weight)
    if key not in packs or packs[key][1] != stamp:
        packs[key] = (module, stamp, pack())
    return packs[key][2]


def packed_available() -> bool:
    """Whether this PyTorch has oneDNN's packed float32 linear of :class:`PackedLinears` (CPU)."""
    return torch.backends.mkldnn.is_available() and \
        all(hasattr(torch.ops.mkldnn, op) for op in ("_reorder_linear_weight", "_linear_pointwise"))


SMALL_WEIGHT = 2 ** 17
"""Weights with fewer elements (a 256x256 attention projection) keep ``F.linear`` in
:class:`PackedLinears` and :class:`Int8Linears`: a oneDNN-packed or an fbgemm int8 product
costs a fixed ~30-40 us a call, more than ``F.linear`` spends on such a weight at 1-20 rows
(10-46 us; 2-core AMD EPYC, AVX2, one thread).  From 1024x256 on, packing pays from a few rows."""


class _SmallWeightsOnFloat:
    """The rule both product factories share: weights of fewer than ``min_elements``
    elements (default :data:`SMALL_WEIGHT`, read when the factory is made) keep ``F.linear``."""

    def __init__(self, min_elements: Optional[int] = None):
        self.min_elements = SMALL_WEIGHT if min_elements is None else min_elements

    def is_small(self, weight: Tensor) -> bool:
        return weight.numel() < self.min_elements


class PackedLinears(_SmallWeightsOnFloat):
    """nn.Linear -> the same float32 projection with its weight packed once into oneDNN's
    blocked layout (CPU).  ``F.linear`` on a few rows re-arranges the whole weight on every
    call; packed once, a block of tokens costs 2-4x less (the 8008x256 output layer at 11
    rows: ~0.3 ms instead of ~1.1 ms on the reference CPU).  One row keeps ``F.linear``
    (fairseq's own call for one token), and so do weights of fewer than ``min_elements``
    elements (:data:`SMALL_WEIGHT`).  Float32 throughout: results can differ from
    ``F.linear``'s in the last bits (another summation order), as ``F.linear``'s own do between
    one row and a block.  Each module is packed once, and again if its weight is replaced or
    changed in place as a tensor (its version counter); a change through ``.data`` (what
    optimizers do) is not seen: take a new ``PackedLinears`` after training steps.  Other
    dtypes and devices keep ``F.linear``."""

    PACKED_FOR_ROWS = 64  # oneDNN's layout hint (a typical number of rows)

    def __init__(self, min_elements: Optional[int] = None):
        super().__init__(min_elements)
        self.packed = {}  # (id(module), rows) -> (module, weight stamp, packed weight)

    def forget(self):
        """Drop every packed weight (after training steps: they changed the weights through ``.data``)."""
        self.packed.clear()

    def __call__(self, module: nn.Linear, rows: int = 0) -> Linear:
        weight, bias = _first_rows(module, rows)
        if weight.device.type != "cpu" or weight.dtype != torch.float32 or self.is_small(weight):
            return float_linear(module, rows)
        packed = packed_once(self.packed, module, rows, weight,
                             lambda: torch.ops.mkldnn._reorder_linear_weight(weight.detach(), self.PACKED_FOR_ROWS))
        row_size = weight.size(1)

        def linear(x: Tensor) -> Tensor:
            if x.numel() == row_size:
                return F.linear(x, weight, bias)
            return torch.ops.mkldnn._linear_pointwise(x.contiguous(), packed, bias, "none", [], "")
        return linear


def half_weights_available() -> bool:
    """Whether this PyTorch has fbgemm's float16-weight float32 product of :class:`HalfWeightLinears` (x86 CPU)."""
    return all(hasattr(torch, op) for op in ("fbgemm_pack_gemm_matrix_fp16", "fbgemm_linear_fp16_weight")) and \
        any(engine in torch.backends.quantized.supported_engines for engine in ("x86", "fbgemm"))


def half_exact(weight: Tensor) -> bool:
    """Whether every element of a float32 ``weight`` is a float16 number (a checkpoint saved
    with ``--fp16`` or exported by ``export_checkpoint --fp16``, loaded as float32)."""
    return weight.dtype == torch.float32 and torch.equal(weight.detach().half().float(), weight.detach())


class HalfWeightLinears(_SmallWeightsOnFloat):
    """nn.Linear -> the same float32 projection with its weight *stored* as float16 (fbgemm,
    x86 CPU): each weight is widened to float32 in registers, the inputs, sums and outputs are
    float32.  Only for a weight whose every element is a float16 number (:func:`half_exact`):
    the product then multiplies the model's own weights bit for bit, and differs from
    ``F.linear``'s only in summation order, as :class:`PackedLinears`' does.  On a CPU a decoder
    step is bounded by reading its weights: this reads half the bytes, and a small model's
    weights then stay in the cache (the Multi30k verifier's 20 MB of float32 do not on the
    2-core EPYC: its 8008x256 output layer at one token took ~0.1-0.2 ms instead of ~0.9 ms).
    Every row count, one included, runs this way, and every weight of ``min_elements``
    elements or more (default: all); the others, and weights that are not float16 numbers,
    run as ``fallback`` (default: a :class:`PackedLinears`).  ``round_weights``: weights that are
    not float16 numbers are rounded to the nearest ones instead (a drafter's, whose numbers
    never decide lossless output).  Each packed weight is checked once against the module's
    (rounded) weight, element for element, and packed again if the weight changes as a tensor
    (see :class:`PackedLinears` for changes through ``.data``)."""

    def __init__(self, min_elements: int = 0, fallback: Optional[Callable] = None, round_weights: bool = False):
        super().__init__(min_elements)
        self.fallback = packed_or_plain() if fallback is None else fallback
        self.round_weights = round_weights
        self.halves = {}  # (id(module), rows) -> (module, weight stamp, (packed weight, bias) or None)

    def forget(self):
        """Drop every packed weight, the fallback's too (see :meth:`PackedLinears.forget`)."""
        self.halves.clear()
        if hasattr(self.fallback, "forget"):
            self.fallback.forget()

    def __call__(self, module: nn.Linear, rows: int = 0) -> Linear:
        weight, bias = _first_rows(module, rows)
        if weight.device.type != "cpu" or weight.dtype != torch.float32 or self.is_small(weight):
            return self.fallback(module, rows)
        half = packed_once(self.halves, module, rows, weight,
                           lambda: self._pack(weight.detach(), bias, self.round_weights))
        if half is None:
            return self.fallback(module, rows)
        packed, full_bias = half
        return lambda x: torch.fbgemm_linear_fp16_weight(x, packed, full_bias)

    @staticmethod
    def _pack(weight: Tensor, bias: Optional[Tensor], round_weights: bool = False):
        """(packed float16 weight, float32 bias), or None when the weight is not float16-exact
        and not to be rounded (or this PyTorch has no fbgemm float16 product)."""
        if not (half_weights_available() and (round_weights or half_exact(weight))):
            return None
        stored = weight.half().float()
        if not bool(stored.isfinite().all()):  # rounding overflowed float16's range
            return None
        with warnings.catch_warnings():  # fbgemm's float16 product is deprecated (torch 2.13 is pinned)
            warnings.simplefilter("ignore", UserWarning)
            packed = torch.fbgemm_pack_gemm_matrix_fp16(stored)
            zeros = weight.new_zeros(weight.size(0))
            unpacked = torch.fbgemm_linear_fp16_weight(torch.eye(weight.size(1)), packed, zeros).t()
        if not torch.equal(unpacked, stored):
            return None
        return packed, zeros if bias is None else bias.detach()


def packed_or_plain():
    """:class:`PackedLinears` where this PyTorch has oneDNN's packed product, else ``F.linear``."""
    return PackedLinears() if packed_available() else float_linear


def float32_linears(round_weights: bool = False):
    """The float32 products of a CPU model: :class:`HalfWeightLinears` over :func:`packed_or_plain`
    where fbgemm has the float16-weight product (``round_weights``: see there), else :func:`packed_or_plain`."""
    if not half_weights_available():
        return packed_or_plain()
    return HalfWeightLinears(fallback=packed_or_plain(), round_weights=round_weights)


@contextlib.contextmanager
def packed_linears(models: List[nn.Module], linears: PackedLinears):
    """Within the block, every plain ``nn.Linear`` of ``models`` whose weight is float32 on
    a CPU runs as ``linears(module)`` (its weight packed once, one row kept on ``F.linear``);
    the modules' own ``forward`` is back on exit.  For inference: the packed product has no
    gradient for the weight.  fairseq's encoder self-attention, which reads its projection
    weights directly (``F.multi_head_attention_forward``), is unchanged."""
    patched = []
    if packed_available():
        for model in models:
            for module in model.modules():
                weight = getattr(module, "weight", None)
                if type(module) is nn.Linear and "forward" not in vars(module) and \
                        weight.device.type == "cpu" and weight.dtype == torch.float32:
                    module.forward = linears(module)
                    patched.append(module)
    try:
        yield
    finally:
        for module in patched:
            del module.forward


def int8_available() -> bool:
    """Whether this PyTorch has the fbgemm/x86 int8 kernels of :class:`Int8Linears` (CPU)."""
    return hasattr(torch.ops.quantized, "linear_dynamic") and \
        any(engine in torch.backends.quantized.supported_engines for engine in ("x86", "fbgemm"))


class Int8Linears(_SmallWeightsOnFloat):
    """nn.Linear -> the same projection with int8 weights (per output channel, symmetric)
    and int8 dynamically quantised inputs (fbgemm, CPU).  On a CPU the small per-token
    matrix products of a decoder are bounded by reading the weights from memory: int8
    weights are a quarter of the bytes (a 1024x256 product at 3 tokens: ~18 us instead of
    ~50-130 us for float32).  Weights of fewer than ``min_elements`` elements (:data:`SMALL_WEIGHT`),
    where int8's fixed cost per call is larger, run as ``fallback`` (default ``F.linear``).  Each module is
    packed once and reused across batches."""

    def __init__(self, min_elements: Optional[int] = None, fallback: Optional[Callable] = None):
        super().__init__(min_elements)
        self.fallback = float_linear if fallback is None else fallback
        self.packed = {}  # (id(module), rows) -> (module, fbgemm packed weight)

    def __call__(self, module: nn.Linear, rows: int = 0) -> Linear:
        weight, bias = _first_rows(module, rows)
        if self.is_small(weight):
            return self.fallback(module, rows)
        key = (id(module), rows)
        if key not in self.packed:  # the module is kept with its pack so that its id is not reused
            self.packed[key] = (module, self._pack(weight, bias))
        packed = self.packed[key][1]
        return lambda x: torch.ops.quantized.linear_dynamic(x.contiguous(), packed, True)

    @staticmethod
    def _pack(weight: Tensor, bias: Optional[Tensor]):
        weight = weight.detach().float()
        bias = None if bias is None else bias.detach().float()
        scales = (weight.abs().amax(dim=1) / 127).clamp(min=1e-12).double()
        zero_points = torch.zeros(weight.size(0), dtype=torch.long)
        with warnings.catch_warnings():  # quantised tensor creation is deprecated (torch 2.13 is pinned)
            warnings.simplefilter("ignore", UserWarning)
            quantized = torch.quantize_per_channel(weight, scales, zero_points, 0, torch.qint8)
            return torch.ops.quantized.linear_prepack(quantized, bias)


ROW_INT8_MIN_ELEMENTS = 2 ** 20
"""Weights with fewer elements keep float16-stored weights in :class:`RowInt8Linears`: scaling each
row costs a few small operations a call (~10-20 us), more than int8 saves on a weight that float16
storage already keeps in the cache (the demo pair's 256x1024 FFN at 1-11 rows)."""


def row_int8_available() -> bool:
    """Whether this PyTorch has the fbgemm kernels of :class:`RowInt8Linears` (x86 CPU): the int8
    product with given input quantisation and the float16-weight product."""
    return int8_available() and half_weights_available() and \
        hasattr(torch.ops.quantized, "linear_with_input_q_dq_qweight_dq_output_fp32")


def _int8_product(x: Tensor, levels: int, packed) -> Tensor:
    """fbgemm's int8 product of ``x`` (..., in) whose values lie in [-1, 1]: each value quantised to
    round(x * levels) (uint8 with zero point levels + 1), int32 sums, times the weights' scales / levels."""
    return torch.ops.quantized.linear_with_input_q_dq_qweight_dq_output_fp32(x, 1.0 / levels, levels + 1, packed)


@functools.lru_cache(maxsize=None)
def activation_levels() -> int:
    """127 where fbgemm's int8 product sums full-range inputs exactly (VNNI), else 63: without VNNI
    (AVX2) it adds pairs of uint8 x int8 products in 16 bits, which saturate (2 x 255 x 127 > 2 ** 15)."""
    packed = Int8Linears._pack(torch.full((1, 64), 127.0), None)  # weights 127, scale 1
    full = _int8_product(torch.ones(1, 64), 127, packed)  # uint8 255 per input
    return 127 if full.item() == 127 * 64 else 63


class RowInt8Linears(_SmallWeightsOnFloat):
    """nn.Linear -> the projection in int8 whose every row is computed as if it were alone: a
    verified block's rows equal, bit for bit, the rows of the one-token steps that greedy search takes.

    Weights: int8 per output channel (symmetric, scale max|w| / 127), packed once (fbgemm, x86 CPU).
    Inputs: each row x (one token) divided by its max|x| and quantised to round(x * levels / max|x|)
    (symmetric int8 per row; levels: :func:`activation_levels`); int32 sums; the result times the
    weight scale / levels and max|x|, plus the bias, in float32.  A row's quantisation
    depends on that row only, and integer sums have no order, so the block cannot differ from the
    step (fbgemm's own dynamic product, :class:`Int8Linears`, quantises with the whole block's range).

    Weights of fewer than ``min_elements`` elements (default :data:`ROW_INT8_MIN_ELEMENTS`) are
    stored as float16 (rounded where they are not float16 numbers) and multiplied in float32 by
    fbgemm (:class:`HalfWeightLinears`), whose rows are computed apart as well.  Each weight is
    packed again if it changes as a tensor; ``forget`` after training steps."""

    def __init__(self, min_elements: Optional[int] = None):
        super().__init__(ROW_INT8_MIN_ELEMENTS if min_elements is None else min_elements)
        self.levels = activation_levels()
        self.half = HalfWeightLinears(fallback=self.int8_linear, round_weights=True)
        self.packed = {}  # (id(module), rows) -> (module, weight stamp, packed int8 weight)

    def forget(self):
        """Drop every packed weight (see :meth:`PackedLinears.forget`)."""
        self.packed.clear()
        self.half.forget()

    def __call__(self, module: nn.Linear, rows: int = 0) -> Linear:
        if self.is_small(_first_rows(module, rows)[0]):
            return self.half(module, rows)
        return self.int8_linear(module, rows)

    def int8_linear(self, module: nn.Linear, rows: int = 0) -> Linear:
        """The int8 product of any weight (the float16 one's fallback too: it never falls back to a
        float product that depends on the other rows)."""
        weight, bias = _first_rows(module, rows)
        packed = packed_once(self.packed, module, rows, weight, lambda: Int8Linears._pack(weight, None))
        levels = self.levels
        bias = None if bias is None else bias.detach()

        def linear(x: Tensor) -> Tensor:
            top = x.abs().amax(-1, keepdim=True).clamp_(min=1e-30)  # (..., 1): each row's own range
            y = _int8_product(x / top, levels, packed)
            return y.mul_(top) if bias is None else torch.addcmul(bias, y, top)
        return linear


def bfloat16_available() -> bool:
    """Whether this PyTorch and CPU have oneDNN's bfloat16 product of :class:`Bfloat16Linears`."""
    return packed_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()


class Bfloat16Linears:
    """nn.Linear -> the projection in bfloat16: the weight (once) and each input rounded to
    bfloat16, the products summed in float32 by oneDNN (AMX tiles or AVX512-BF16 on x86), plus the
    bias (bfloat16), the result rounded to bfloat16 and widened back to float32.  oneDNN's bfloat16
    kernels split no sum across rows: a row's product is the same alone or in a block (tested), so
    a verified block gives, bit for bit, the products of greedy's one-token steps.  With AMX a block
    of up to 16 rows costs about what one row does (a 2048x512 weight in the cache of the reference
    Xeon: ~70 us for 1 or 11 rows, against ~55 and ~140 us for fbgemm's float16-stored product);
    one row costs more (a fixed ~16-20 us a call; read from memory, a whole decoder's weights took
    ~1.6x fbgemm's time at one row and about its time at 11).

    The modules in ``float_modules`` (the output layer: rounding logits to bfloat16 would tie
    candidates) run as ``fallback`` instead.  Each weight is packed again if it changes as a tensor;
    ``forget`` after training steps."""

    def __init__(self, float_modules: List[nn.Module] = (), fallback: Optional[Callable] = None):
        self.float_modules = list(float_modules)  # kept: their ids are not reused
        self.float_ids = {id(module) for module in self.float_modules}
        self.fallback = float_linear if fallback is None else fallback
        self.packed = {}  # (id(module), rows) -> (module, weight stamp, (packed weight, bfloat16 bias))

    def forget(self):
        """Drop every packed weight, the fallback's too (see :meth:`PackedLinears.forget`)."""
        self.packed.clear()
        if hasattr(self.fallback, "forget"):
            self.fallback.forget()

    def __call__(self, module: nn.Linear, rows: int = 0) -> Linear:
        if id(module) in self.float_ids:
            return self.fallback(module, rows)
        weight, bias = _first_rows(module, rows)
        packed, bias16 = packed_once(self.packed, module, rows, weight, lambda: (
            torch.ops.mkldnn._reorder_linear_weight(weight.detach().bfloat16(), 1),
            None if bias is None else bias.detach().bfloat16()))

        def linear(x: Tensor) -> Tensor:
            x = x.to(torch.bfloat16).contiguous()
            return torch.ops.mkldnn._linear_pointwise(x, packed, bias16, "none", [], "").float()
        return linear
