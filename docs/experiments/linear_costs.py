"""Microbenchmark, one thread: F.linear vs oneDNN-packed vs fbgemm int8 vs addmm for the Multi30k models' weight shapes at 1-20 rows (us per call)."""
import torch, time
import torch.nn.functional as F
torch.set_num_threads(1)
def bench(f, n=300):
    for _ in range(20): f()
    t=time.perf_counter()
    for _ in range(n): f()
    return (time.perf_counter()-t)/n*1e6
for (o,i) in [(8008,256),(1024,256),(256,1024),(256,256)]:
    w=torch.randn(o,i); b=torch.randn(o)
    packed=torch.ops.mkldnn._reorder_linear_weight(w,64)
    qw = torch.ao.nn.quantized.dynamic.Linear(i,o)
    qw.set_weight_bias(torch.quantize_per_channel(w, w.abs().amax(1)/127, torch.zeros(o,dtype=torch.long), 0, torch.qint8), b)
    for rows in [1,2,5,11,20]:
        x=torch.randn(rows,i)
        a=bench(lambda: F.linear(x,w,b)); p=bench(lambda: torch.ops.mkldnn._linear_pointwise(x,packed,b,"none",[],""))
        q=bench(lambda: qw(x)); m=bench(lambda: torch.addmm(b,x,w.t()))
        print(f"{o}x{i} rows {rows}: F.linear {a:.0f}us packed {p:.0f}us int8 {q:.0f}us addmm {m:.0f}us")
