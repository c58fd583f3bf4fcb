"""The draft length k (``block_size``) of default SpecDec, several values in one process, sentence by sentence in
turns (the order reversed every other sentence), batch 1, the demo pair, outputs compared; times relative to the
first value.

    RUNS=... python docs/experiments/ab_block_size.py 300 2 10,8,6     # valid sentences, rounds, values of k
"""
import sys
import time

import torch

import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)

torch.set_num_threads(1)
count, rounds = int(sys.argv[1]), int(sys.argv[2])
values = [int(k) for k in sys.argv[3].split(",")]
generators = {k: demo_pair.load(block_size=k).generator for k in values}
samples = demo_pair.samples(demo_pair.load(), count + 10)
for sample in samples[:10]:
    for generator in generators.values():
        generator.generate(None, sample)
seconds = {k: 0.0 for k in values}
for r in range(rounds):
    for i, sample in enumerate(samples[10:]):
        outputs = []
        for k in (values if (i + r) % 2 == 0 else values[::-1]):
            start = time.perf_counter()
            outputs.append(generators[k].generate(None, sample)[0][0]["tokens"].tolist())
            seconds[k] += time.perf_counter() - start
        assert all(output == outputs[0] for output in outputs), i
print(" ".join(f"k={k}: {s:.2f} s ({s / seconds[values[0]]:.3f})" for k, s in seconds.items()), "outputs equal")
