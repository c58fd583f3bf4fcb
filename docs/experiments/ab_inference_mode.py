"""torch.inference_mode vs no_grad around decoding, in one process, sentence by sentence in
turns (ABBA), batch 1, outputs compared.  Measured at 7f1f4cf, before the core decoded in
inference mode itself (at later commits both variants run in inference mode):

    git checkout 7f1f4cf -- fairseq_plugins && RUNS=... python docs/experiments/ab_inference_mode.py 200 specdec 2
    RUNS=... python docs/experiments/ab_inference_mode.py 200 beam 2    # fairseq's own greedy search
"""
import os
import sys, time, torch, contextlib
torch.set_num_threads(1)
RUNS = os.environ.get("RUNS", "../runs")
import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)
n=int(sys.argv[1]); dec=sys.argv[2]; rounds=int(sys.argv[3])
opts=dict(draft_length="fixed") if dec.startswith("specdec") else {}
t = demo_pair.load(decoding=dec, sentencepiece_model="checkpoints/demo/sentencepiece.model", **opts)  # beam: the drafter idles
lines = open(RUNS + "/m30raw/valid.en").read().splitlines()[:n]
for l in lines[:10]: t.translate([l])
T={"A":0.0,"B":0.0}; outs={"A":[],"B":[]}
for r in range(rounds):
  for i,l in enumerate(lines):
    for v in ("AB" if i%2==0 else "BA"):
        ctx = torch.inference_mode() if v=="B" else contextlib.nullcontext()
        with ctx:
            t0=time.perf_counter(); o=t.translate([l]); T[v]+=time.perf_counter()-t0
        if r==0: outs[v]+=o
print("A(no_grad) %.3f s  B(inference_mode) %.3f s  B/A %.3f  same=%s" % (T["A"],T["B"],T["B"]/T["A"], outs["A"]==outs["B"]))
