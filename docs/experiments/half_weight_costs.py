"""Microbenchmark, one thread: the Multi30k verifier's weight shapes (the 8008x256 output layer, 18 256x256,
three 1024x256 and three 256x1024 projections: 20 MB of float32), all products of one step in turn, at 1 and 11
rows: F.linear vs oneDNN-packed float32 vs fbgemm float16-stored weights (HalfWeightLinears' product), us per
step (median of 170); the largest difference to F.linear.  Weights are float16 numbers.  Run beside nothing:
``python docs/experiments/half_weight_costs.py``."""
import statistics as s
import time

import torch
import torch.nn.functional as F
torch.set_num_threads(1)
def mk(o,i): return (torch.randn(o,i)*0.05).half().float()
mats = [mk(8008,256)] + [mk(256,256) for _ in range(18)] + [mk(1024,256) for _ in range(3)] + [mk(256,1024) for _ in range(3)]
bias = [torch.zeros(m.shape[0]) for m in mats]
packed16 = [torch.fbgemm_pack_gemm_matrix_fp16(m) for m in mats]
pk = [torch.ops.mkldnn._reorder_linear_weight(m, 64) for m in mats]
for rows in [1, 11]:
    xs = {256: torch.randn(rows,256), 1024: torch.randn(rows,1024)}
    def run(kind):
        t=[0.0,0.0]
        for j,(m,b,p,q) in enumerate(zip(mats,bias,packed16,pk)):
            x = xs[m.shape[1]]; t0=time.perf_counter()
            if kind=="f32": F.linear(x,m,b)
            elif kind=="mkldnn": torch.ops.mkldnn._linear_pointwise(x,q,b,"none",[],"")
            else: torch.fbgemm_linear_fp16_weight(x,p,b)
            t[0 if j==0 else 1]+=time.perf_counter()-t0
        return t
    for kind in ["f32","mkldnn","fp16w","f32","mkldnn","fp16w"]:
        ts=[run(kind) for _ in range(200)][30:]
        print(rows, kind, f"outproj {1e6*s.median([a for a,b in ts]):.0f}us others {1e6*s.median([b for a,b in ts]):.0f}us")
    x=xs[256]; ref=F.linear(x,mats[0],bias[0]); got=torch.fbgemm_linear_fp16_weight(x,packed16[0],bias[0])
    print("max abs diff", (ref-got).abs().max().item(), "ref scale", ref.abs().max().item())
x = torch.randn(1, 256)
ts = []
for _ in range(300):
    t0 = time.perf_counter(); F.linear(x, mats[0], bias[0]); ts.append(time.perf_counter() - t0)
print(f"the output layer alone, repeated (its weight stays in the cache): F.linear {1e6 * s.median(ts[50:]):.0f}us")
