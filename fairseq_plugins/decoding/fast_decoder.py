"""A lean inference forward of fairseq's decoder layers over preallocated key/value buffers.

fairseq's ``MultiheadAttention`` in incremental mode concatenates the whole cache with the
new keys on every call, and a block verifier then has to cut every cache back.  Here each
layer owns buffers written in place::

    self_key / self_value: (B, heads, capacity, head_dim), zero-initialised
    row i's block of m tokens is written at slots [valid[i], valid[i] + m);
    slots past a row's own tokens are masked, never read as data.

so rolling back is moving the per-row lengths (the caller's ``valid``) and nothing else.
The encoder keys/values are projected once per batch.

The arithmetic is fairseq 0.12.2's own incremental path (which an incremental
``MultiheadAttention`` always takes, never ``F.multi_head_attention_forward``): q/k/v
linear projections, attention softmax(q k^T * head_dim ** -0.5) v with hidden slots
masked, output projection; the layer's residuals and layer norms as configured (pre- or
post-norm).  Dropout is the identity (eval).  The attention is one call of torch's
``scaled_dot_product_attention`` instead of fairseq's scale / bmm / -inf / float32
softmax / bmm: the same numbers to rounding (in a float64 model fairseq's float32 softmax
is the coarser one), with about ten fewer operations per attention.
"""
import contextlib
import operator
import warnings
from typing import Callable, Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from fairseq.modules import LayerDropModuleList, MultiheadAttention
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase
from torch import Tensor, nn

INITIAL_CAPACITY = 32


def attention_problems(attn, name: str) -> List[str]:
    if type(attn) is not MultiheadAttention:
        return [f"{name} of type {type(attn).__name__}"]
    problems = []
    if attn.bias_k is not None or attn.add_zero_attn:
        problems.append(f"{name} with bias_kv/zero_attn")
    if attn.skip_embed_dim_check or attn.onnx_trace or attn.dropout_module.apply_during_inference:
        problems.append(f"{name} with pruned heads, onnx tracing or inference dropout")
    if any(type(proj) is not nn.Linear for proj in (attn.q_proj, attn.k_proj, attn.v_proj, attn.out_proj)):
        problems.append(f"{name} with quantised projections")
    return problems


def _layer_problems(layer) -> List[str]:
    if type(layer).forward is not TransformerDecoderLayerBase.forward:
        return [f"decoder layer type {type(layer).__name__}"]
    problems = []
    if layer.cross_self_attention or not layer.self_attn.self_attention:
        problems.append("cross-self-attention")
    if layer.quant_noise or type(layer.fc1) is not nn.Linear or type(layer.fc2) is not nn.Linear:
        problems.append("quant noise")
    if any(p is not None for p in (layer.c_attn, layer.attn_ln, layer.ffn_layernorm, layer.w_resid)):
        problems.append("scaled heads/attention/fc/residuals")
    if layer.onnx_trace or layer.dropout_module.apply_during_inference \
            or layer.activation_dropout_module.apply_during_inference:
        problems.append("onnx tracing or inference dropout")
    problems += attention_problems(layer.self_attn, "self-attention")
    if layer.encoder_attn is not None:
        problems += attention_problems(layer.encoder_attn, "encoder attention")
    return problems


def fast_path_problems(decoder) -> List[str]:
    """Why :class:`FastDecoderLayers` cannot run ``decoder``'s layers (empty list: it can)."""
    if decoder.training:
        return ["training mode"]
    if isinstance(decoder.layers, LayerDropModuleList):
        return ["layerdrop"]
    problems = []
    for layer in decoder.layers:
        problems += [p for p in _layer_problems(layer) if p not in problems]
    return problems


def plain_norm(module) -> Callable[[Tensor], Tensor]:
    """The layer norm as a plain function (a module call costs more than the kernel)."""
    if type(module) is not nn.LayerNorm:
        return module
    shape, weight, bias, eps = module.normalized_shape, module.weight, module.bias, module.eps
    return lambda x: torch.layer_norm(x, shape, weight, bias, eps, True)  # what F.layer_norm calls


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


class ModuleSnapshot:
    """What objects built from a module's weights rely on: every submodule and parameter of its
    tree the same object (and no new one), every parameter unchanged as a tensor (what
    :func:`weight_stamp` reads: version counter and data pointer), the same training mode.
    ``unchanged()`` runs its loops in C (``map``): 20-40 us for the Multi30k verifier's decoder
    (80 parameters), where building its lean layers again costs ~0.4 ms."""

    def __init__(self, module: nn.Module):
        self.module, self.training = module, module.training
        owners = list(module.modules())
        self.tables = [owner._modules for owner in owners] + [owner._parameters for owner in owners]
        self.sizes = list(map(len, self.tables))
        members = [(table, name, member) for table in self.tables for name, member in table.items()]
        self.member_tables, self.member_names, self.members = (list(column) for column in zip(*members)) \
            if members else ([], [], [])  # self.members holds them: their ids are not reused
        self.parameters = [p for p in self.members if isinstance(p, Tensor)]
        self.versioned = [p for p in self.parameters if not p.is_inference()]  # inference tensors have no version
        self.stamps = self._stamps()

    def _stamps(self) -> tuple:
        return list(map(_VERSION, self.versioned)), list(map(Tensor.data_ptr, self.parameters))

    def unchanged(self) -> bool:
        return self.module.training == self.training and list(map(len, self.tables)) == self.sizes \
            and all(map(operator.is_, map(dict.get, self.member_tables, self.member_names), self.members)) \
            and self._stamps() == self.stamps


_VERSION = operator.attrgetter("_version")


class BuiltOnce:
    """Objects built from a module's weights (its lean layers, its fast encoder), built on the
    first batch and reused by the next ones while the module is unchanged (:class:`ModuleSnapshot`).
    One per generator (it keeps the modules it saw alive); ``clear()`` after changing weights
    in a way the snapshot does not see (through ``.data``, with the products' ``forget``)."""

    def __init__(self):
        # (what, id(module), id(linear)) -> (snapshot, linear, object); the snapshot holds the module and the
        # entry the linear factory, so that neither id is reused while the entry lives
        self.built: Dict[tuple, tuple] = {}

    def get(self, what: str, module: nn.Module, linear, build: Callable):
        key = (what, id(module), id(linear))
        entry = self.built.get(key)
        if entry is None or not entry[0].unchanged():
            entry = self.built[key] = (ModuleSnapshot(module), linear, build())
        return entry[2]

    def clear(self):
        self.built.clear()


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
        key, stamp = (id(module), rows), weight_stamp(weight)
        if key not in self.packed or self.packed[key][1] != stamp:  # the module is kept: its id is not reused
            packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), self.PACKED_FOR_ROWS)
            self.packed[key] = (module, stamp, packed)
        packed, row_size = self.packed[key][2], weight.size(1)

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
        self.fallback = PackedLinears() if fallback is None else fallback
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
        key, stamp = (id(module), rows), weight_stamp(weight)
        if key not in self.halves or self.halves[key][1] != stamp:  # the module is kept: its id is not reused
            self.halves[key] = (module, stamp, self._pack(weight.detach(), bias, self.round_weights))
        if self.halves[key][2] is None:
            return self.fallback(module, rows)
        packed, full_bias = self.halves[key][2]
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
    ~50-130 us for float32).  Weights of fewer than ``min_elements`` elements keep
    ``F.linear`` (:data:`SMALL_WEIGHT`).  Each module is packed once and reused across batches."""

    def __init__(self, min_elements: Optional[int] = None):
        super().__init__(min_elements)
        self.packed = {}  # (id(module), rows) -> (module, fbgemm packed weight)

    def __call__(self, module: nn.Linear, rows: int = 0) -> Linear:
        weight, bias = _first_rows(module, rows)
        if self.is_small(weight):
            return float_linear(module, rows)
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


def split_heads(x: Tensor, heads: int, head_dim: int) -> Tensor:
    """(T, B, heads * head_dim) -> (B, heads, T, head_dim) (a view)."""
    return x.view(x.size(0), x.size(1), heads, head_dim).permute(1, 2, 0, 3)


def attend(q: Tensor, k: Tensor, v: Tensor, visible: Optional[Tensor], scaling: float) -> Tensor:
    """Queries q (B, H, m, d), keys/values (B, H, L, d), bool mask broadcastable to
    (B, H, m, L) (True = may attend) or None -> (m, B, H*d): softmax(q k^T * scaling) v,
    in one ``scaled_dot_product_attention`` call (fairseq's bmm / -inf / softmax / bmm, one
    operation instead of about ten; equal to rounding)."""
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=visible, scale=scaling)
    return out.permute(2, 0, 1, 3).reshape(q.size(2), q.size(0), -1)


class LayerWeights:
    """One ``TransformerDecoderLayer``'s weights as plain functions (built once per model: :func:`lean_layers`)."""

    def __init__(self, layer, linear=float_linear):
        sa = layer.self_attn
        self.heads, self.head_dim, self.scaling = sa.num_heads, sa.head_dim, sa.scaling
        self.normalize_before = layer.normalize_before
        self.self_q, self.self_k, self.self_v = linear(sa.q_proj), linear(sa.k_proj), linear(sa.v_proj)
        self.self_out = linear(sa.out_proj)
        self.self_norm = plain_norm(layer.self_attn_layer_norm)
        self.has_encoder_attn = layer.encoder_attn is not None
        if self.has_encoder_attn:
            self.encoder_q, self.encoder_out = linear(layer.encoder_attn.q_proj), linear(layer.encoder_attn.out_proj)
            self.encoder_k, self.encoder_v = linear(layer.encoder_attn.k_proj), linear(layer.encoder_attn.v_proj)
            self.encoder_norm = plain_norm(layer.encoder_attn_layer_norm)
        self.fc1, self.fc2, self.activation = linear(layer.fc1), linear(layer.fc2), layer.activation_fn
        self.final_norm = plain_norm(layer.final_layer_norm)


def lean_layers(decoder, linear=float_linear, built: Optional[BuiltOnce] = None) -> Optional[List[LayerWeights]]:
    """The decoder's layers as :class:`LayerWeights` (reused from ``built`` while the decoder is
    unchanged), or None when :func:`fast_path_problems` finds something they do not run."""
    def build():
        return None if fast_path_problems(decoder) else [LayerWeights(layer, linear) for layer in decoder.layers]
    return build() if built is None else built.get("decoder layers", decoder, linear, build)


class FastLayer:
    """One decoder layer's key/value buffers for a batch, run with its :class:`LayerWeights`."""

    def __init__(self, weights: LayerWeights, batch_size: int, like: Tensor):
        self.weights = weights
        shape = (batch_size, weights.heads, INITIAL_CAPACITY, weights.head_dim)
        self.key = like.new_zeros(shape)
        self.value = like.new_zeros(shape)
        self.encoder_key: Optional[Tensor] = None  # (B, H, S, d)
        self.encoder_value: Optional[Tensor] = None

    def project_encoder(self, encoder_states: Optional[Tensor]):
        """Encoder keys/values (S, B, C) -> (B, H, S, d), once per batch."""
        w = self.weights
        if not w.has_encoder_attn or encoder_states is None:
            return
        self.encoder_key = split_heads(w.encoder_k(encoder_states), w.heads, w.head_dim).contiguous()
        self.encoder_value = split_heads(w.encoder_v(encoder_states), w.heads, w.head_dim).contiguous()

    def ensure_capacity(self, needed: int):
        capacity = self.key.size(2)
        if needed <= capacity:
            return
        capacity = max(needed, 2 * capacity)
        for name in ("key", "value"):
            old = getattr(self, name)
            new = old.new_zeros(old.size(0), old.size(1), capacity, old.size(3))
            new[:, :, : old.size(2)] = old
            setattr(self, name, new)

    def keep_rows(self, rows: Tensor):
        self.key, self.value = self.key.index_select(0, rows), self.value.index_select(0, rows)
        if self.encoder_key is not None:
            self.encoder_key = self.encoder_key.index_select(0, rows)
            self.encoder_value = self.encoder_value.index_select(0, rows)

    def self_attention(self, x: Tensor, write, length: int, visible: Optional[Tensor], first_out: int = 0) -> Tensor:
        """x (m, B, C) -> (m - first_out, B, C): the attention output of the block's tokens from ``first_out`` on;
        ``write(buffer, new)`` stores the keys and values (B, H, m, d) of all m at each row's slots."""
        w = self.weights
        for buffer, projection in ((self.key, w.self_k), (self.value, w.self_v)):
            write(buffer, split_heads(projection(x), w.heads, w.head_dim))
        if first_out:
            x, visible = x[first_out:], None if visible is None else visible[..., first_out:, :]
        q = split_heads(w.self_q(x), w.heads, w.head_dim)
        out = attend(q, self.key[:, :, :length], self.value[:, :, :length], visible, w.scaling)
        return w.self_out(out)

    def encoder_attention(self, x: Tensor, encoder_visible: Optional[Tensor]) -> Tensor:
        w = self.weights
        q = split_heads(w.encoder_q(x), w.heads, w.head_dim)
        return w.encoder_out(attend(q, self.encoder_key, self.encoder_value, encoder_visible, w.scaling))

    def forward(self, x: Tensor, write, length: int, self_visible, encoder_visible, first_out: int = 0) -> Tensor:
        """fairseq's ``TransformerDecoderLayerBase.forward`` at inference, x (m, B, C) -> (m - first_out, B, C):
        every token's keys and values are cached, the output is computed for the tokens from ``first_out`` on."""
        w = self.weights
        pre = w.normalize_before
        residual = x[first_out:]
        x = residual + self.self_attention(w.self_norm(x) if pre else x, write, length, self_visible, first_out)
        if not pre:
            x = w.self_norm(x)
        if self.encoder_key is not None:
            residual = x
            x = residual + self.encoder_attention(w.encoder_norm(x) if pre else x, encoder_visible)
            if not pre:
                x = w.encoder_norm(x)
        residual = x
        h = w.final_norm(x) if pre else x
        h = w.fc2(w.activation(w.fc1(h)))
        x = residual + h
        return x if pre else w.final_norm(x)


class FastDecoderLayers:
    """All decoder layers, fed blocks of m tokens per row at per-row offsets.

    The caller owns the per-row lengths: ``forward`` writes row i's block at slots
    [valid[i], valid[i] + m) of every buffer, and the caller then adds what it keeps.
    ``layers``: the decoder's :func:`lean_layers`; ``like``: a tensor of the buffers' dtype and device.
    """

    def __init__(self, layers: List[LayerWeights], encoder_out, batch_size: int, like: Tensor):
        self.layers = [FastLayer(weights, batch_size, like) for weights in layers]
        states = encoder_out["encoder_out"][0] if len(encoder_out["encoder_out"]) > 0 else None
        masks = encoder_out["encoder_padding_mask"]
        for layer in self.layers:
            layer.project_encoder(states)
        self.encoder_visible = None  # (B, 1, 1, S) bool, True at real tokens; None when no source position is padding
        if len(masks) > 0 and bool(masks[0].any()):
            self.encoder_visible = ~masks[0].to(torch.bool)[:, None, None, :]

    def forward(self, x: Tensor, valid: Tensor, low: int, high: int, block_visible: Optional[Tensor] = None,
                block_padding: Optional[Tensor] = None, outputs: int = 0) -> Tensor:
        """x (m, B, C) at steps valid[i] + j; every row has between ``low`` and ``high``
        cached tokens. Returns (m, B, C), or with ``outputs`` > 0 the last layer's output of the block's last
        ``outputs`` tokens only (outputs, B, C): the others' keys and values are cached all the same.

        Inside the block, token j sees token b <= j (causal) or, given ``block_visible``
        ((m, m) bool), where ``block_visible[j, b]`` unless ``block_padding[i, b]`` ((B, m) bool
        or None, slots of row i that nobody sees); every token sees its row's whole cache."""
        m = x.size(0)
        length = high + m
        for layer in self.layers:
            layer.ensure_capacity(length)
        write = self._uniform_write(low, m) if low == high else self._ragged_write(valid, m)
        if block_visible is not None and low == high and block_padding is None:
            visible = F.pad(block_visible, (low, 0), value=True)  # (m, length): every row sees its whole cache
        elif block_visible is not None:
            visible = self._block_visible(valid, length, m, block_visible, block_padding)
        elif low == high:
            visible = self._uniform_visible(low, m, x.device)
        else:
            visible = self._ragged_visible(valid, length, m)
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            first_out = m - outputs if outputs and i == last else 0
            x = layer.forward(x, write, length, visible, self.encoder_visible, first_out)
        return x

    @staticmethod
    def _uniform_write(start: int, m: int):
        def write(buffer: Tensor, new: Tensor):
            buffer[:, :, start:start + m] = new
        return write

    @staticmethod
    def _uniform_visible(start: int, m: int, device) -> Optional[Tensor]:
        """(m, start + m) bool, False above the block's diagonal; None for one token."""
        if m == 1:
            return None
        slots = torch.arange(start + m, device=device)
        return slots.unsqueeze(0) <= (start + torch.arange(m, device=device)).unsqueeze(1)

    @staticmethod
    def _ragged_write(valid: Tensor, m: int):
        slots = valid.unsqueeze(1) + torch.arange(m, device=valid.device)  # (B, m)

        def write(buffer: Tensor, new: Tensor):
            index = slots[:, None, :, None].expand(-1, new.size(1), -1, new.size(3))
            buffer.scatter_(2, index, new)
        return write

    @staticmethod
    def _ragged_visible(valid: Tensor, length: int, m: int) -> Tensor:
        """(B, 1, m, length) bool: token j of row i sees slots <= valid[i] + j."""
        last_seen = valid.unsqueeze(1) + torch.arange(m, device=valid.device)  # (B, m)
        slots = torch.arange(length, device=valid.device)
        return (slots <= last_seen.unsqueeze(2)).unsqueeze(1)

    @staticmethod
    def _block_visible(valid: Tensor, length: int, m: int, visible: Tensor, padding: Optional[Tensor]) -> Tensor:
        """(B, 1, m, length) bool, True = seen: row i's slots before valid[i] (its cache), and
        its slot s holding block token s - valid[i] (in [0, m)) where ``visible`` allows it and
        it is not padding; slots past the block are not seen."""
        offset = torch.arange(length, device=valid.device).unsqueeze(0) - valid.unsqueeze(1)  # (B, L)
        in_block = (offset >= 0) & (offset < m)
        index = offset.clamp(0, m - 1)
        seen = visible[:, index].transpose(0, 1)  # (B, m, L)
        if padding is not None:
            seen = seen & ~padding.gather(1, index).unsqueeze(1)
        seen = (seen & in_block.unsqueeze(1)) | (offset < 0).unsqueeze(1)
        return seen.unsqueeze(1)

    def keep_rows(self, rows: Tensor):
        for layer in self.layers:
            layer.keep_rows(rows)
        if self.encoder_visible is not None:
            self.encoder_visible = self.encoder_visible.index_select(0, rows)
