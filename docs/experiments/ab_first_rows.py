"""Judging a block's first rows first (docs/experiments/first_rows.patch, not built): the
verifier's output layer on a block's first FIRST_ROWS rows, on the rest only when a row
accepted all they judge.  In one process, FIRST_ROWS = A and B taking turns sentence by
sentence (ABBA), lossless SpecDec at batch 1, outputs compared.

    git apply docs/experiments/first_rows.patch
    RUNS=... python docs/experiments/ab_first_rows.py 400 2 1000 4     # 1000 = whole blocks
    git apply -R docs/experiments/first_rows.patch
"""
import os
import sys, time, torch
torch.set_num_threads(1)
RUNS = os.environ.get("RUNS", "../runs")
import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)
from fairseq_plugins.decoding import core
n=int(sys.argv[1]); rounds=int(sys.argv[2]); A=int(sys.argv[3]); B=int(sys.argv[4]); length=sys.argv[5] if len(sys.argv)>5 else "fixed"
t = demo_pair.load(draft_length=length, sentencepiece_model="checkpoints/demo/sentencepiece.model")
lines = open(RUNS + "/m30raw/valid.en").read().splitlines()[:n]
for l in lines[:10]: t.translate([l])
T={A:0.0,B:0.0}; outs={A:[],B:[]}
for r in range(rounds):
  for i,l in enumerate(lines):
    for v in ((A,B) if i%2==0 else (B,A)):
        core.FIRST_ROWS=v
        t0=time.perf_counter(); o=t.translate([l]); T[v]+=time.perf_counter()-t0
        if r==0: outs[v]+=o
print("FIRST_ROWS=%d %.3f s  FIRST_ROWS=%d %.3f s  ratio %.3f  same=%s" % (A,T[A],B,T[B],T[B]/T[A], outs[A]==outs[B]))
