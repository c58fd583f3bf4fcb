"""A/B in one process: lossless SpecDec at batch 1 with the demo drafter's sequential head, its drafts verified whole
vs cut where the head's own confidence falls below P (for each P of argv[3], comma-separated): at position j the
head's softmax over its m candidates (after the candidate chosen at j - 1) gives the chosen token a probability; the
draft keeps token j while the product of these over the tokens before j is >= P (the first token always).  The
verifier's block then has fewer tokens (on this CPU ~30–40 µs each: verifier_block_cost.py), and the output is greedy's
either way (asserted).  argv[1] valid sentences, argv[2] rounds, the variants taking turns sentence by sentence (ABBA
order).  In the warm-up round the walk below (``max`` where ``choices`` takes ``argmax``) is checked against ``draft``.
Run from the repository root: ``RUNS=... python docs/experiments/ab_head_confidence_cut.py 300 2 0.2,0.5``
(``LENGTH=fixed``: draft every iteration; default: the product's default draft length)."""
import math
import os
import sys
import time

import torch

import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)
from fairseq_plugins.models.sequential_head import HeadDrafting

torch.set_num_threads(1)
count, rounds = int(sys.argv[1]), int(sys.argv[2])
thresholds = [0.0] + [float(p) for p in sys.argv[3].split(",")]
translator = demo_pair.load(**({"draft_length": os.environ["LENGTH"]} if os.environ.get("LENGTH") else {}))
generator = translator.generator
pad = translator.task.target_dictionary.pad()
samples = demo_pair.samples(translator, count, os.environ.get("SPLIT", "valid"))
setting = {"P": 0.0, "check": True}
whole_draft = HeadDrafting.draft


def cut_draft(self, states, logits, last):
    """``HeadDrafting.draft`` (its walk on the host, reading the head's confidence too), cut."""
    if setting["P"] <= 0:
        return whole_draft(self, states, logits, last)
    batch, k = states.shape[:2]
    candidates, scores = self.pair_scores(states, logits, last)
    m = candidates.size(-1)
    best, choice = scores.max(-1)  # (B * k, m)
    confidence = (best - scores.logsumexp(-1)).view(batch, k, m).tolist()  # log-probability of the choice
    table, floor = choice.view(batch, k, m).tolist(), math.log(setting["P"])
    chosen, kept = [], []
    for row, row_confidence in zip(table, confidence):
        p, path, total, keep = 0, [], 0.0, k
        for j, (choices, logp) in enumerate(zip(row, row_confidence)):
            if total < floor and keep == k:
                keep = j
            total += logp[p]
            p = choices[p]
            path.append(p)
        chosen.append(path)
        kept.append(keep)
    drafts = candidates.gather(-1, torch.tensor(chosen, dtype=torch.long)[:, :, None]).squeeze(-1)
    if setting["check"]:
        assert torch.equal(drafts, whole_draft(self, states, logits, last)), "the walk drafts otherwise"
    for b, keep in enumerate(kept):
        drafts[b, keep:] = pad
    return drafts


HeadDrafting.draft = cut_draft
seconds = {p: 0.0 for p in thresholds}
iterations = {p: 0 for p in thresholds}
tokens = {p: 0 for p in thresholds}
for round_ in range(rounds + 1):  # round 0 warms up and checks the walk
    setting["check"] = round_ == 0
    for i, sample in enumerate(samples):
        outputs = []
        for p in (thresholds if (i + round_) % 2 == 0 else thresholds[::-1]):
            setting["P"] = p
            before = generator.stats.loop_iterations
            start = time.perf_counter()
            out = generator.generate(translator.models, sample)[0][0]["tokens"].tolist()
            if round_ > 0:
                seconds[p] += time.perf_counter() - start
                iterations[p] += generator.stats.loop_iterations - before
                tokens[p] += len(out)
            outputs.append(out)
        assert all(out == outputs[0] for out in outputs), f"sentence {i}: the variants' outputs differ"
for p in thresholds:
    print(f"P = {p}: {seconds[p]:.2f} s, {tokens[p] / iterations[p]:.2f} tokens per iteration, "
          f"{1e3 * seconds[p] / iterations[p]:.3f} ms per iteration, {seconds[p] / seconds[0.0]:.3f} the time uncut")
