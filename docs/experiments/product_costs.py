"""Microbenchmark, one thread: the products the decoders can run for the Multi30k models' weight shapes (verifier
output layer 8008x256, drafter output layer 3456x256, feed-forward 1024x256 / 256x1024, attention 256x256) at 1, 11
and 20 rows, in us per call: F.linear (float32), oneDNN-packed float32, fbgemm's float16-stored weights (float32
arithmetic; what the verifier runs on a CPU), bfloat16 F.linear and oneDNN-packed bfloat16 (AMX where the CPU has it;
not lossless for the verifier).  Weights are float16 numbers, as the demo pair's.

    python docs/experiments/product_costs.py      # pause background trainings first
"""
import time
import warnings

import torch
import torch.nn.functional as F

warnings.simplefilter("ignore")  # fbgemm's float16 product is deprecated (torch 2.13 is pinned)
torch.set_num_threads(1)


def bench(f, n=400):
    for _ in range(30):
        f()
    start = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - start) / n * 1e6


for out_features, in_features in [(8008, 256), (3456, 256), (1024, 256), (256, 1024), (256, 256)]:
    w = torch.randn(out_features, in_features).half().float()
    b = torch.randn(out_features)
    packed = torch.ops.mkldnn._reorder_linear_weight(w, 64)
    half = torch.fbgemm_pack_gemm_matrix_fp16(w)
    wb, bb = w.bfloat16(), b.bfloat16()
    packed_bf16 = torch.ops.mkldnn._reorder_linear_weight(wb, 64)
    for rows in [1, 11, 20]:
        x = torch.randn(rows, in_features)
        xb = x.bfloat16()
        costs = dict(F=bench(lambda: F.linear(x, w, b)),
                     packed=bench(lambda: torch.ops.mkldnn._linear_pointwise(x, packed, b, "none", [], "")),
                     fp16w=bench(lambda: torch.fbgemm_linear_fp16_weight(x, half, b)),
                     bf16=bench(lambda: F.linear(xb, wb, bb)),
                     bf16packed=bench(lambda: torch.ops.mkldnn._linear_pointwise(xb, packed_bf16, bb, "none", [], "")))
        print(f"{out_features}x{in_features} rows {rows}: " + " ".join(f"{k} {v:.0f}" for k, v in costs.items()))
