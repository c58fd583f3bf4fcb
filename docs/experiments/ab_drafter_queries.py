"""Drafter queries Q (the block's mask tokens; the demo drafter was trained with 10) vs tokens per
iteration and time: lossless SpecDec at batch 1, drafting every iteration, on argv[1] valid sentences,
argv[2] rounds, the Q values of argv[3] taking turns in chunks of sentences (not ABBA: compare with
care, see ab_fused_projections.py); asserts equal outputs.  Run from the repository root:
``RUNS=... python docs/experiments/ab_drafter_queries.py 300 3 10,8,6,5``."""
import sys
import time

import torch

import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)

torch.set_num_threads(1)
count, rounds = int(sys.argv[1]), int(sys.argv[2])
qs = [int(q) for q in sys.argv[3].split(",")]
t = demo_pair.load(draft_length="fixed")
g = t.generator
dec = g.drafter.model.decoder
samples = demo_pair.samples(t, count)
sec = {q: 0.0 for q in qs}; its = {q: 0 for q in qs}; toks = {q: 0 for q in qs}
for r in range(rounds + 1):
    outs = {}
    for q in qs:
        dec.block_size = q; g.cfg.block_size = q
        b0 = g.stats.loop_iterations
        t0 = time.perf_counter()
        out = [g.generate(t.models, s)[0][0]["tokens"] for s in samples[r::rounds + 1]]
        dt = time.perf_counter() - t0
        outs[q] = [o.tolist() for o in out]
        if r:
            sec[q] += dt; its[q] += g.stats.loop_iterations - b0; toks[q] += sum(len(o) for o in out)
    assert len({str(v) for v in outs.values()}) == 1
for q in qs:
    print(f"Q={q}: {sec[q]:.2f} s, {toks[q]/its[q]:.2f} tokens/iteration, {1e3*sec[q]/its[q]:.2f} ms/iteration, {sec[q]/sec[qs[0]]:.3f} of Q={qs[0]}")
