"""A/B in one process: the self-attention's q/k/v projections (and the encoder attention's k/v)
as one product per layer (``fast_decoder.fused_projections``: verifier, drafter and the verifier's
encoder) vs one product each (before); lossless SpecDec at batch 1 on argv[1] valid sentences,
argv[2] rounds.  The variants alternate sentence by sentence in ABBA order (a variant run second
in a pair was measured ~5 % slower than the same variant run first, in chunks of sentences), and
outputs are asserted equal.  ``DRAFT_LENGTH=fixed`` drafts every iteration (equal iteration counts).
Run from the repository root: ``RUNS=... DRAFT_LENGTH=fixed python docs/experiments/ab_fused_projections.py 300 4``;
``SAME=1`` runs the unfused variant twice (an A/A run: the method's own spread)."""
import os
import sys
import time

import torch

from fairseq_plugins.decoding import fast_decoder as fd
from fairseq_plugins.decoding import fast_encoder

import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)

torch.set_num_threads(1)
count, rounds = (int(a) for a in (sys.argv[1:3] if len(sys.argv) > 2 else (300, 4)))
t = demo_pair.load(draft_length=os.environ.get("DRAFT_LENGTH", "measured"))
g = t.generator
samples = demo_pair.samples(t, count)
fused, apart = fd.fused_projections, (lambda linear, modules: None)
variants = {"apart": apart, "fused": apart if os.environ.get("SAME") else fused}
products = {name: (fd.float32_linears(), fd.float32_linears(round_weights=True)) for name in variants}
seconds = {name: 0.0 for name in variants}
iterations = {name: 0 for name in variants}


def run(name, sample, timed):
    fd.fused_projections = fast_encoder.fused_projections = variants[name]
    g.verifier_linear, g.drafter.linear = products[name]
    before = g.stats.loop_iterations
    t0 = time.perf_counter()
    tokens = g.generate(t.models, sample)[0][0]["tokens"].tolist()
    if timed:
        seconds[name] += time.perf_counter() - t0
        iterations[name] += g.stats.loop_iterations - before
    return tokens


names = list(variants)
for r in range(rounds + 1):  # round 0 warms both variants up
    for i, sample in enumerate(samples):
        order = names if (i + r) % 2 == 0 else names[::-1]
        outputs = [run(name, sample, timed=r > 0) for name in order]
        assert outputs[0] == outputs[1], "outputs differ"
for name in names:
    print(f"{name}: {seconds[name]:.3f} s, {1e3 * seconds[name] / iterations[name]:.2f} ms per iteration "
          f"({iterations[name]} iterations), {seconds[name] / seconds['apart']:.3f} of apart")
