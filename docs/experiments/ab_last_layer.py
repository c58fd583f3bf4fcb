"""A/B in one process: the drafter's last layer for the queries alone (the new prefix tokens' keys and values still
cached: ``FastDecoderLayers.forward(..., outputs=Q)``, what ``DrafterCache`` runs) vs for the whole block (before),
lossless SpecDec at batch 1, drafting every iteration, on argv[1] valid sentences, argv[2] rounds.  The variants
alternate sentence by sentence in ABBA order, and their outputs are asserted equal.  Run from the repository root:
``RUNS=... python docs/experiments/ab_last_layer.py 500 4``; ``SAME=1`` runs the whole-block variant twice (an A/A
run: the method's own spread).
"""
import os
import sys
import time

import torch

import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)

torch.set_num_threads(1)
count, rounds = (int(a) for a in (sys.argv[1:3] if len(sys.argv) > 2 else (500, 4)))
translator = demo_pair.load(draft_length="fixed")
generator = translator.generator
samples = demo_pair.samples(translator, count)
generator.generate(translator.models, samples[0])  # builds the drafter cache's lean layers
layers_class = type(generator.drafter.cache.layers)
queries_only = layers_class.forward


def whole_block(self, x, *args, outputs=0, **kwargs):
    """The last layer over the whole block; with ``outputs`` (the drafter's call; the verifier's block asks for every
    row) the queries' rows returned, as ``queries_only`` returns them."""
    block = queries_only(self, x, *args, **kwargs)
    return block[x.size(0) - outputs:] if outputs else block


variants = {"whole block": whole_block, "queries only": whole_block if os.environ.get("SAME") else queries_only}
seconds = {name: 0.0 for name in variants}
iterations = {name: 0 for name in variants}


def run(name, sample, timed):
    layers_class.forward = variants[name]
    before = generator.stats.loop_iterations
    start = time.perf_counter()
    tokens = generator.generate(translator.models, sample)[0][0]["tokens"].tolist()
    if timed:
        seconds[name] += time.perf_counter() - start
        iterations[name] += generator.stats.loop_iterations - before
    return tokens


names = list(variants)
for round_ in range(rounds + 1):  # round 0 warms up
    for i, sample in enumerate(samples):
        order = names if (i + round_) % 2 == 0 else names[::-1]
        outputs = [run(name, sample, timed=round_ > 0) for name in order]
        assert outputs[0] == outputs[1], f"sentence {i}: the variants' outputs differ"
layers_class.forward = queries_only
base = names[0]
for name in names:
    per_iteration = 1e3 * seconds[name] / iterations[name]
    print(f"{name}: {seconds[name]:.2f} s, {iterations[name]} iterations, {per_iteration:.3f} ms per iteration, "
          f"{seconds[name] / seconds[base]:.3f} of {base}")
