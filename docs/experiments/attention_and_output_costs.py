"""Two costs behind the README's account of the cheaper iteration, one thread, in inference mode:
one attention as fairseq computes it (scale, bmm, -inf mask, float32 softmax, bmm; the lean layers
before df2f0f1) vs one ``scaled_dot_product_attention`` call, and the demo verifier's 8008x256
output layer (float16-stored weights) at 1-11 rows.

    RUNS=... python docs/experiments/attention_and_output_costs.py
"""
import statistics
import time

import torch
import torch.nn.functional as F

import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)
from fairseq_plugins.decoding.incremental import output_layer

torch.set_num_threads(1)
HEADS, HEAD_DIM = 4, 64


def median_us(f, n=2000):
    for _ in range(100):
        f()
    times = []
    for _ in range(n):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return 1e6 * statistics.median(times)


def fairseq_attention(x, keys, values, hidden):
    """x (m, 1, H*d) queries, keys/values (1, H, L, d), hidden (m, L) True = masked -> (m, 1, H*d)."""
    m, length = x.size(0), keys.size(2)
    q = (x * HEAD_DIM ** -0.5).contiguous().view(m, HEADS, HEAD_DIM).transpose(0, 1)
    weights = torch.bmm(q, keys[0, :, :length].transpose(1, 2))
    if hidden is not None:
        weights = weights.masked_fill(hidden, float("-inf"))
    probs = F.softmax(weights, dim=-1, dtype=torch.float32).type_as(weights)
    return torch.bmm(probs, values[0, :, :length]).transpose(0, 1).contiguous().view(m, 1, -1)


def fused_attention(x, keys, values, visible):
    q = x.view(x.size(0), 1, HEADS, HEAD_DIM).permute(1, 2, 0, 3)
    out = F.scaled_dot_product_attention(q, keys, values, attn_mask=visible, scale=HEAD_DIM ** -0.5)
    return out.permute(2, 0, 1, 3).reshape(x.size(0), 1, -1)


with torch.inference_mode():
    for m, length in [(1, 20), (11, 25), (13, 20)]:
        x = torch.randn(m, 1, HEADS * HEAD_DIM)
        keys, values = torch.randn(1, HEADS, length, HEAD_DIM), torch.randn(1, HEADS, length, HEAD_DIM)
        hidden = torch.ones(m, length, dtype=torch.bool).triu(length - m + 1) if m > 1 else None
        visible = None if hidden is None else ~hidden
        a, b = fairseq_attention(x, keys, values, hidden), fused_attention(x, keys, values, visible)
        print(f"attention, {m} tokens over {length}: fairseq's {median_us(lambda: fairseq_attention(x, keys, values, hidden)):.1f}"
              f" us, fused {median_us(lambda: fused_attention(x, keys, values, visible)):.1f} us,"
              f" largest difference {(a - b).abs().max().item():.1e}")
    generator = demo_pair.load().generator
    project = output_layer(generator.verifier.decoder, generator.verifier_linear)
    for rows in (1, 2, 4, 7, 11):
        x = torch.randn(1, rows, 256)
        print(f"output layer, {rows} rows: {median_us(lambda: project(x), 300):.0f} us, "
              f"with log-softmax {median_us(lambda: torch.log_softmax(project(x).float(), -1), 300):.0f} us")
