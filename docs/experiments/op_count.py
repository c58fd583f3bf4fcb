"""What a SpecDec iteration dispatches: tensor operations and host synchronisations per section.

On a GPU at batch 1 this small model is launch-bound (the 2026-11-27 H200 profile: the 2-layer drafter
0.53 greedy steps per iteration, the 6-layer verifier's whole block 0.40, acceptance 0.22), so the number
of operations a section dispatches, and how often it waits for the device (``int(t)``, ``bool(t)``,
``t.tolist()``: aten ``_local_scalar_dense`` / ``item`` / ``is_nonzero``), is what its GPU time follows.
Both counts are the same on a CPU, so this runs anywhere.

    RUNS=... [DRAFTER=...] python docs/experiments/op_count.py [SENTENCES] [DECODING] [--out OUT.json]

Counts per iteration over the first SENTENCES (default 100) test2016 sentences, batch 1, the demo pair,
in the core's profile sections (``decoding.core``: encoder, drafter, verifier, accept; "other": outside
them).
"""
import argparse
import contextlib
import json
import os
import sys
from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

torch.set_num_threads(1)
import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)

SYNCS = {"_local_scalar_dense", "item", "is_nonzero", "equal"}


class Counting(TorchDispatchMode):
    """Counts every aten operation, by the section it ran in; also the core's profiler
    (``section(name)``, ``tick()``), which tells it the section."""

    def __init__(self):
        super().__init__()
        self.current = "other"
        self.ops, self.syncs, self.iterations = Counter(), Counter(), 0
        self.names = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        self.ops[self.current] += 1
        self.names[(self.current, name)] += 1
        if name in SYNCS:
            self.syncs[self.current] += 1
        return func(*args, **(kwargs or {}))

    @contextlib.contextmanager
    def section(self, name):
        previous, self.current = self.current, name
        try:
            yield
        finally:
            self.current = previous

    def tick(self):
        self.iterations += 1


def main(argv):
    parser = argparse.ArgumentParser(description="tensor operations and host syncs per SpecDec iteration")
    parser.add_argument("sentences", type=int, nargs="?", default=100)
    parser.add_argument("decoding", nargs="?", default="specdec")
    parser.add_argument("--out", help="JSON with the counts, also per operation name")
    args = parser.parse_args(argv)
    n, decoding, out = args.sentences, args.decoding, args.out
    drafter = os.environ.get("DRAFTER", "checkpoints/demo/drafter.pt")
    translator = demo_pair.load(decoding=decoding, drafter=drafter, sentencepiece_model="checkpoints/demo/sentencepiece.model")
    sentences = demo_pair.raw_sentences(n)
    translator.translate(sentences[:2])  # warm-up: lean layers built once
    counting = Counting()
    translator.generator.profiler = counting
    with counting:
        translator.translate(sentences)
    it = counting.iterations
    rows = {s: {"ops": counting.ops[s] / it, "syncs": counting.syncs[s] / it}
            for s in ("encoder", "drafter", "verifier", "accept", "other")}
    print(f"{decoding}, {n} sentences, {it} iterations ({it / n:.2f} a sentence); per iteration:")
    print("| section | aten ops | host syncs |\n|---|---|---|")
    for s, r in rows.items():
        print(f"| {s} | {r['ops']:.1f} | {r['syncs']:.2f} |")
    print(f"| all | {sum(r['ops'] for r in rows.values()):.1f} | {sum(r['syncs'] for r in rows.values()):.2f} |")
    for s in ("drafter", "accept"):
        top = sorted(((c, name) for (sec, name), c in counting.names.items() if sec == s), reverse=True)[:12]
        print(f"{s}: " + ", ".join(f"{name} {c / it:.1f}" for c, name in top))
    if out:
        with open(out, "w") as f:
            json.dump({"iterations": it, "sentences": n, "decoding": decoding, "per_iteration": rows,
                       "by_op": {f"{s}:{name}": c / it for (s, name), c in counting.names.items()}}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
