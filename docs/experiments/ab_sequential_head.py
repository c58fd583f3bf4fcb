"""A/B in one process: lossless SpecDec at batch 1 with the drafter's sequential head (``--head-candidates``, default
8) vs without it (``--head-candidates 0``: the block's own drafts), the same drafter, on argv[1] sentences of SPLIT
(default valid), argv[2] rounds.  The variants alternate sentence by sentence in ABBA order, and their outputs are
asserted equal (both are greedy's).  Run from the repository root:
``RUNS=... DRAFTER=drafter-with-head.pt python docs/experiments/ab_sequential_head.py 500 4``
(``LENGTH=fixed``: draft every iteration; default: the product's default draft length).
"""
import os
import sys
import time

import torch

import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)

torch.set_num_threads(1)
count, rounds = (int(a) for a in (sys.argv[1:3] if len(sys.argv) > 2 else (500, 4)))
options = {"draft_length": os.environ["LENGTH"]} if os.environ.get("LENGTH") else {}
translator = demo_pair.load(drafter=os.environ.get("DRAFTER", "checkpoints/demo/drafter.pt"), **options)
generator = translator.generator
head = generator.drafter.head
if head is None:
    sys.exit("the drafter has no sequential head (train one with fairseq_plugins.scripts.train_sequential_head)")
samples = demo_pair.samples(translator, count, os.environ.get("SPLIT", "valid"))
variants = {"without the head": None, f"with the head ({head.n_candidates} candidates)": head}
seconds = {name: 0.0 for name in variants}
iterations = {name: 0 for name in variants}
tokens = {name: 0 for name in variants}


def run(name, sample, timed):
    generator.drafter.head = variants[name]
    before = generator.stats.loop_iterations
    start = time.perf_counter()
    out = generator.generate(translator.models, sample)[0][0]["tokens"].tolist()
    if timed:
        seconds[name] += time.perf_counter() - start
        iterations[name] += generator.stats.loop_iterations - before
        tokens[name] += len(out)
    return out


names = list(variants)
for round_ in range(rounds + 1):  # round 0 warms up
    for i, sample in enumerate(samples):
        order = names if (i + round_) % 2 == 0 else names[::-1]
        outputs = [run(name, sample, timed=round_ > 0) for name in order]
        assert outputs[0] == outputs[1], f"sentence {i}: the variants' outputs differ"
base = names[0]
for name in names:
    print(f"{name}: {seconds[name]:.2f} s, {iterations[name]} loop iterations ({tokens[name] / iterations[name]:.2f} "
          f"tokens each), {1e3 * seconds[name] / iterations[name]:.3f} ms per iteration, "
          f"{seconds[name] / seconds[base]:.3f} of the time {base}")
