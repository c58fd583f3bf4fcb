"""A/B in one process of ``core.JUDGED_FIRST``: the verifier's output layer on the rows judging a block's first
JUDGED_FIRST drafts, on the rest only when a row accepted all of them (``SpeculativeGenerator._judge``).  Lossless
SpecDec at batch 1 on the first N valid sentences, ROUNDS rounds; the values alternate sentence by sentence in ABBA
order (``ab_fused_projections.py``'s method: ~1 % resolution) and the outputs are asserted equal.  1000 = whole
blocks at once (the package's way).  Not built: the patch adds ``JUDGED_FIRST`` to ``decoding.core``.  Run from the
repository root, trainings paused:

    git apply docs/experiments/judged_first.patch
    RUNS=... python docs/experiments/ab_judged_first.py N ROUNDS 1000,4,3 [fixed|measured]
    git apply -R docs/experiments/judged_first.patch

It also prints, per value, the output layer's time (``VerifierCache.log_probs``: the full-vocabulary product and
log-softmax) per iteration and the rows it read out.
"""
import sys
import time

import torch

import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)
from fairseq_plugins.decoding import core
from fairseq_plugins.decoding.incremental import VerifierCache

torch.set_num_threads(1)
count, rounds, values = int(sys.argv[1]), int(sys.argv[2]), [int(v) for v in sys.argv[3].split(",")]
t = demo_pair.load(draft_length=sys.argv[4] if len(sys.argv) > 4 else "fixed")
g = t.generator
samples = demo_pair.samples(t, count)
for sample in samples[:10]:
    g.generate(None, sample)
seconds = {v: 0.0 for v in values}
outputs = {v: [] for v in values}
for r in range(rounds):
    for i, sample in enumerate(samples):
        for v in (values if i % 2 == 0 else values[::-1]):
            core.JUDGED_FIRST = v
            start = time.perf_counter()
            hypo = g.generate(None, sample)[0][0]
            seconds[v] += time.perf_counter() - start
            if r == 0:
                outputs[v].append((hypo["tokens"].tolist(), float(hypo["score"])))
base = values[0]
output_layer = {v: [0.0, 0, 0] for v in values}  # seconds, rows, iterations (the last round)
log_probs = VerifierCache.log_probs


def timed_log_probs(self, states):
    start = time.perf_counter()
    out = log_probs(self, states)
    record = output_layer[core.JUDGED_FIRST]
    record[0] += time.perf_counter() - start
    record[1] += states.size(1)
    return out


def timed_forward_block(self, tokens, rows=None):
    output_layer[core.JUDGED_FIRST][2] += 1
    return forward_block(self, tokens, rows)


forward_block = VerifierCache.forward_block
VerifierCache.log_probs, VerifierCache.forward_block = timed_log_probs, timed_forward_block
for sample in samples:
    for v in values:
        core.JUDGED_FIRST = v
        g.generate(None, sample)
for v, (spent, rows, iterations) in output_layer.items():
    print(f"JUDGED_FIRST={v}: output layer {spent / iterations * 1e3:.3f} ms and {rows / iterations:.2f} rows an iteration")
for v in values:
    same = outputs[v] == outputs[base]
    print(f"JUDGED_FIRST={v}: {seconds[v]:.3f} s, {seconds[v] / seconds[base]:.3f}x of {base}; outputs equal: {same}")
    assert [o[0] for o in outputs[v]] == [o[0] for o in outputs[base]]
