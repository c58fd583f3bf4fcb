"""A/B in one process: the verifier's products packed float32 (PackedLinears, the default before
HalfWeightLinears) vs float16-stored weights (HalfWeightLinears) for every weight (H) or from
SMALL_WEIGHT elements on (H_big), and with the drafter's products float16-stored too instead of int8
(H+drafter_H); lossless SpecDec at batch 1 on argv[1] valid sentences, the
variants taking turns in argv[2] rounds; asserts equal outputs.  Run from the repository root:
``RUNS=... python docs/experiments/ab_half_weights.py 300 6``."""
import os
import sys
import time

import torch

from fairseq_plugins import inference
from fairseq_plugins.api import Translator
from fairseq_plugins.decoding import fast_decoder as fd

RUNS = os.environ.get("RUNS", "../runs")
torch.set_num_threads(1)
count, rounds = (int(a) for a in (sys.argv[1:3] if len(sys.argv) > 2 else (300, 6)))
t = Translator.load("checkpoints/demo/verifier.pt", RUNS + "/multi30k/bin", decoding="specdec",
                    drafter="checkpoints/demo/drafter.pt", source_lang="en", target_lang="de",
                    max_len_a=1.2, max_len_b=10)
g = t.generator
lines = open(RUNS + "/multi30k/spm/valid.en").read().splitlines()[:count]
samples = []
for line in lines:
    src = inference.encode(t.task.source_dictionary, line).unsqueeze(0)
    samples.append({"net_input": {"src_tokens": src, "src_lengths": torch.tensor([src.numel()])}})
variants = {  # name: (the verifier's products, the drafter's)
    "packed": (fd.PackedLinears(), fd.Int8Linears()),
    "H": (fd.HalfWeightLinears(), fd.Int8Linears()),
    "H_big": (fd.HalfWeightLinears(fd.SMALL_WEIGHT), fd.Int8Linears()),
    "H+drafter_H": (fd.HalfWeightLinears(), fd.HalfWeightLinears()),
}
seconds = {name: 0.0 for name in variants}
iterations = {name: 0 for name in variants}
outputs = {}
for r in range(rounds + 1):  # round 0 warms every variant up
    for name, (verifier_linear, drafter_linear) in variants.items():
        g.verifier_linear, g.drafter.linear = verifier_linear, drafter_linear
        before = g.stats.loop_iterations
        t0 = time.perf_counter()
        out = [g.generate(t.models, s)[0][0]["tokens"].tolist() for s in samples[r::rounds + 1]]
        if r:
            seconds[name] += time.perf_counter() - t0
            iterations[name] += g.stats.loop_iterations - before
        outputs[(r, name)] = out
    assert len({str(outputs[(r, name)]) for name in variants}) == 1, "outputs differ"
for name in variants:
    print(f"{name}: {seconds[name]:.3f} s, {1e3 * seconds[name] / iterations[name]:.2f} ms per iteration "
          f"({iterations[name]} iterations), {seconds[name] / seconds['packed']:.3f} of packed")
