"""The harness's "arithmetic" cell: in which number format each row's matrix products ran.

Read after the row was timed, from what its generator built: the verifier's products
(``--verifier-matmul``: float16-stored weights widened to float32 where the weights are float16
numbers, else float32; int8 weights per channel times int8 activations per row with int32 sums; bfloat16
weights and inputs with float32 sums) and,
where it differs, the drafter's (``--drafter-precision``).
fairseq's own search runs the model as loaded; CTranslate2 runs its compute type.
"""
from typing import Optional

import torch

FLOAT16_STORED = "float16-stored weights, float32 math"
ROW_INT8 = "int8 weights per channel x int8 activations per row, int32 sums"
BFLOAT16 = "bfloat16 weights and inputs, float32 sums"


def dtype_name(model) -> str:
    """The dtype of a model's parameters, e.g. "float32"."""
    return str(next(model.parameters()).dtype).replace("torch.", "")


def _with_smaller(large: str, small: str, model) -> str:
    """An int8 factory's cell: its int8 products, and what ran its smaller weights unless the model's dtype."""
    return large if small == dtype_name(model) else f"{large} (smaller weights: {small})"


def products(linear, model) -> str:
    """What a linears factory (``decoding.linears``; None or ``F.linear``: as loaded) ran for ``model``'s
    weights: float16-stored weights when it packed any as float16 (rounded ones said so), int8, else the
    model's dtype; :class:`RowInt8Linears` and :class:`Int8Linears`: int8, and what ran their smaller weights where
    that differs from the model's dtype; :class:`Bfloat16Linears`: bfloat16, and what ran its output layer."""
    from fairseq_plugins.decoding.linears import Bfloat16Linears, HalfWeightLinears, Int8Linears, RowInt8Linears

    if isinstance(linear, Int8Linears):
        return _with_smaller("int8 weights and inputs", products(linear.fallback, model), model)
    if isinstance(linear, RowInt8Linears):
        return _with_smaller(ROW_INT8, products(linear.half, model), model)
    if isinstance(linear, Bfloat16Linears):
        return f"{BFLOAT16} (output layer: {products(linear.fallback, model)})" if linear.float_ids else BFLOAT16
    if isinstance(linear, HalfWeightLinears) and any(entry[-1] is not None for entry in linear.halves.values()):
        return FLOAT16_STORED.replace("weights", "weights (rounded)") if linear.round_weights else FLOAT16_STORED
    return dtype_name(model)


def generator_arithmetic(generator, verifier) -> Optional[str]:
    """The cell of a plugin row (its generator after decoding): the verifier's products, then the drafter's
    where they differ (``drafter: ...``); a generator without a verifier cache (drafter-only): its drafter's."""
    drafter = getattr(generator, "drafter", None)
    drafter = getattr(drafter, "ordinary", drafter)  # cuda_graphs.GraphedBlockDrafter wraps the block drafter
    drafter_model = getattr(drafter, "model", None)
    drafted = products(getattr(drafter, "linear", None), drafter_model) if isinstance(
        drafter_model, torch.nn.Module) else None
    if not hasattr(generator, "verifier_linear"):
        return drafted
    verified = products(generator.verifier_linear, verifier)
    return verified if drafted in (None, verified) else f"{verified}; drafter: {drafted}"
