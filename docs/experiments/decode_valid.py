"""One process: decode N Multi30k valid sentences at batch 1 (after 10 warm-up ones) with one
decoder of the demo pair; print the seconds, a hash of the outputs and which package ran.

    RUNS=... python docs/experiments/decode_valid.py 300 specdec fixed
"""
import hashlib
import os
import sys
import time

import torch

torch.set_num_threads(1)
RUNS = os.environ.get("RUNS", "../runs")
import demo_pair  # noqa: E402  (docs/experiments/demo_pair.py: the script's own folder is on sys.path)
import fairseq_plugins  # noqa: E402  (the package on PYTHONPATH, if any: see ab_two_trees.sh)

n, decoding = int(sys.argv[1]), sys.argv[2]
options = {"draft_length": sys.argv[3]} if decoding.startswith("specdec") and len(sys.argv) > 3 else {}
translator = demo_pair.load(decoding=decoding, sentencepiece_model="checkpoints/demo/sentencepiece.model", **options)
lines = open(RUNS + "/m30raw/valid.en").read().splitlines()[:n + 10]
for line in lines[:10]:
    translator.translate([line])
outputs, start = [], time.perf_counter()
for line in lines[10:]:
    outputs += translator.translate([line])
seconds = time.perf_counter() - start
print(f"RESULT {seconds:.4f} {hashlib.md5(chr(10).join(outputs).encode()).hexdigest()[:8]} {fairseq_plugins.__file__}")
