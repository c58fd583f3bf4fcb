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
DEMO = os.environ.get("DEMO", "checkpoints/demo")
import fairseq_plugins  # noqa: E402  (the package on PYTHONPATH, if any: see ab_two_trees.sh)
from fairseq_plugins.api import Translator  # noqa: E402

n, decoding = int(sys.argv[1]), sys.argv[2]
options = {"draft_length": sys.argv[3]} if decoding.startswith("specdec") and len(sys.argv) > 3 else {}
translator = Translator.load(f"{DEMO}/verifier.pt", RUNS + "/multi30k/bin", source_lang="en", target_lang="de",
                             decoding=decoding, drafter=None if decoding == "beam" else f"{DEMO}/drafter.pt",
                             sentencepiece_model=f"{DEMO}/sentencepiece.model", max_len_a=1.2, max_len_b=10, **options)
lines = open(RUNS + "/m30raw/valid.en").read().splitlines()[:n + 10]
for line in lines[:10]:
    translator.translate([line])
outputs, start = [], time.perf_counter()
for line in lines[10:]:
    outputs += translator.translate([line])
seconds = time.perf_counter() - start
print(f"RESULT {seconds:.4f} {hashlib.md5(chr(10).join(outputs).encode()).hexdigest()[:8]} {fairseq_plugins.__file__}")
