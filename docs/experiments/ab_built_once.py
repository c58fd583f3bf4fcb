"""Building the lean layers and the fast encoder once (``fast_decoder.BuiltOnce``) vs for every
batch, as before; in one process, sentence by sentence in turns (ABBA), batch 1, the demo pair,
default SpecDec, outputs compared.  Variant A swaps in a ``BuiltOnce`` that builds on every
call (what the code did before: the problem checks, the weights as plain functions, the fast
encoder), variant B is the package as it is (built once, checked unchanged for every batch).

    RUNS=... python docs/experiments/ab_built_once.py 400 2     # sentences of valid, rounds
"""
import sys
import time

import torch

import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)
from fairseq_plugins.decoding.fast_decoder import BuiltOnce


class EveryBatch(BuiltOnce):
    def get(self, what, module, linear, build):
        return build()


torch.set_num_threads(1)
count, rounds = int(sys.argv[1]), int(sys.argv[2])
translator = demo_pair.load()
generator, drafter = translator.generator, translator.generator.drafter
variants = {"A": (EveryBatch(), EveryBatch()), "B": (BuiltOnce(), BuiltOnce())}
samples = demo_pair.samples(translator, count + 10)


def decode(variant, sample):
    generator.built, drafter.built = variants[variant]
    start = time.perf_counter()
    tokens = generator.generate(None, sample)[0][0]["tokens"].tolist()
    return time.perf_counter() - start, tokens


for sample in samples[:10]:
    decode("A", sample), decode("B", sample)
seconds = {"A": 0.0, "B": 0.0}
for r in range(rounds):
    for i, sample in enumerate(samples[10:]):
        outputs = {}
        for variant in ("AB" if (i + r) % 2 == 0 else "BA"):
            elapsed, outputs[variant] = decode(variant, sample)
            seconds[variant] += elapsed
        assert outputs["A"] == outputs["B"], i
print(f"A (built every batch) {seconds['A']:.3f} s  B (built once) {seconds['B']:.3f} s  "
      f"B/A {seconds['B'] / seconds['A']:.4f}  outputs equal")
