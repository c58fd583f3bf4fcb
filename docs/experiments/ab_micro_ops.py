"""A/B in one process of two small savings per iteration, neither in the package: the verifier's
greedy choice by ``max`` (``topk(2)`` only where a row has a tie: fairseq's tie order) instead of
``topk(2)``, and the drafter's argmax on its logits instead of on its log-softmax ("cd"); and a
calibration variant that only busy-waits 100 us per iteration (~1 % of one; "busy").  Lossless
SpecDec at batch 1, drafting every iteration, on argv[1] valid sentences, argv[2] rounds; the
variants named in argv[3] (of old, cd, busy) alternate sentence by sentence (ABBA); outputs are
asserted equal.  Run from the repository root:
``RUNS=... python docs/experiments/ab_micro_ops.py 300 3 old,cd`` or ``... 200 2 old,busy,cd``."""
import sys
import time

import torch

from fairseq_plugins.decoding import acceptance, core
from fairseq_plugins.models import drafter_cache

import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)

torch.set_num_threads(1)
count, rounds, names = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split(",")
t = demo_pair.load(draft_length="fixed")
g = t.generator
samples = demo_pair.samples(t, count)
topk_choices, log_probs = acceptance.verifier_choices, drafter_cache.DrafterCache._log_probs


def max_choices(lprobs, cum):
    candidates = lprobs + cum.unsqueeze(-1)
    scores, tokens = candidates.max(dim=-1)
    if bool((candidates == scores.unsqueeze(-1)).sum(-1).gt(1).any()):
        return topk_choices(lprobs, cum)
    return tokens, scores


def logits(self, x):
    decoder = self.decoder
    if decoder.layer_norm is not None:
        x = decoder.layer_norm(x)
    x = x.transpose(0, 1)
    if decoder.project_out_dim is not None:
        x = decoder.project_out_dim(x)
    out = self.project(x).float()
    out[..., [b for b in decoder.banned if b < out.size(-1)]] = float("-inf")
    return out


def busy_choices(lprobs, cum):
    start = time.perf_counter()
    while time.perf_counter() - start < 1e-4:
        pass
    return topk_choices(lprobs, cum)


variants = {"old": (topk_choices, log_probs), "cd": (max_choices, logits), "busy": (busy_choices, log_probs)}
seconds = {name: 0.0 for name in names}
for r in range(rounds + 1):  # round 0 warms up
    for i, sample in enumerate(samples):
        outputs = []
        for name in (names if (i + r) % 2 == 0 else names[::-1]):
            core.acceptance.verifier_choices, drafter_cache.DrafterCache._log_probs = variants[name]
            start = time.perf_counter()
            outputs.append(g.generate(t.models, sample)[0][0]["tokens"].tolist())
            if r:
                seconds[name] += time.perf_counter() - start
        assert all(out == outputs[0] for out in outputs), "outputs differ"
for name in names:
    print(f"{name}: {seconds[name]:.3f} s, {seconds[name] / seconds[names[0]]:.4f} of {names[0]}")
