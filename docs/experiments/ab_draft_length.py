"""A/B in one process: lossless SpecDec with the guard (``--draft-length measured``, the default)
vs drafting every iteration (``fixed``) with the demo pair and today's defaults, batch 1, on
argv[1] valid sentences, argv[2] rounds, the two alternating sentence by sentence in ABBA order
(taking turns in chunks of sentences, as this script first did, a variant run second was measured
~5 % slower than the same variant run first: ``docs/experiments/ab_fused_projections.py``); asserts
equal outputs.  Run from the repository root: ``RUNS=... python docs/experiments/ab_draft_length.py 500 3``.
An optional argv[3], comma-separated ``favour`` values (e.g. ``1.1,1.25``), adds a guard with each beside the
default one (each keeps its own measurements; ``measured`` is the default guard); argv[4] the split (default valid)."""
import sys
import time

import torch

import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)
from fairseq_plugins.decoding.draft_length import DraftGuard


torch.set_num_threads(1)
count, rounds = int(sys.argv[1]), int(sys.argv[2])
t = demo_pair.load()
g = t.generator
samples = demo_pair.samples(t, count, sys.argv[4] if len(sys.argv) > 4 else "valid")
variants = {"measured": g.guard, "fixed": None}  # no guard: the core drafts every iteration
for favour in (sys.argv[3].split(",") if len(sys.argv) > 3 else []):
    variants[f"favour={favour}"] = DraftGuard(skip_catch_up=g.guard.skip_catch_up, favour=float(favour))
seconds = {name: 0.0 for name in variants}
undrafted = {name: [0, 0] for name in variants}  # iterations without a draft, all iterations (timed rounds)


def counted(name, start_iteration):
    def start(rows=1):
        drafting = start_iteration(rows)
        undrafted[name][0] += not drafting
        undrafted[name][1] += 1
        return drafting
    return start


for name, guard in variants.items():
    if guard is not None:
        guard.start_iteration = counted(name, guard.start_iteration)
names = list(variants)
for r in range(rounds + 1):  # round 0 warms both up
    for i, sample in enumerate(samples):
        outputs = {}
        for name in (names if (i + r) % 2 == 0 else names[::-1]):  # ABBA
            g.guard = variants[name]
            t0 = time.perf_counter()
            outputs[name] = g.generate(t.models, sample)[0][0]["tokens"].tolist()
            if r:
                seconds[name] += time.perf_counter() - t0
        assert all(out == outputs["fixed"] for out in outputs.values()), "outputs differ"
print({name: round(s, 3) for name, s in seconds.items()}, "fixed/measured", seconds["fixed"] / seconds["measured"])
print({name: f"no draft in {n} of {total} iterations" for name, (n, total) in undrafted.items() if total})
