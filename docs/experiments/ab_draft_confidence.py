"""Measured at this commit (the option was then removed: no measurable gain, see docs/results.md).
A/B in one process: specdec with --draft-confidence 0 / 0.05 / 0.1 / 0.2 (one generator, the
threshold switched between chunks), Multi30k valid, batch 1, the settings taking turns in ROUNDS
rounds over interleaved chunks; the outputs must agree.  Run from the repository root:
RUNS=... python docs/experiments/ab_draft_confidence.py [N_SENT [ROUNDS [BATCH]]]"""
import os, sys, time, dataclasses, torch
torch.set_num_threads(1)
from fairseq_plugins.api import Translator
RUNS = os.environ.get("RUNS", "../runs")
n_sent = int(sys.argv[1]) if len(sys.argv) > 1 else 500
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 10
batch = int(sys.argv[3]) if len(sys.argv) > 3 else 1
t = Translator.load("checkpoints/demo/verifier.pt", RUNS + "/multi30k/bin", decoding="specdec",
                    drafter="checkpoints/demo/drafter.pt", source_lang="en", target_lang="de", max_len_a=1.2, max_len_b=10)
g = t.generator
lines = open(RUNS + "/multi30k/spm/valid.en").read().splitlines()[:n_sent]
chunks = [lines[start:start + batch] for start in range(0, len(lines), batch)]
settings = (0.0, 0.05, 0.1, 0.2)
seconds = {s: 0.0 for s in settings}
iterations = {s: 0 for s in settings}
t.translate_tokens(lines[:10 * batch], batch_size=batch)  # warm-up
for r in range(rounds):
    outputs = {}
    for s in (settings if r % 2 == 0 else settings[::-1]):
        g.cfg = dataclasses.replace(g.cfg, draft_confidence=s)
        before = g.stats.loop_iterations
        start = time.perf_counter()
        outputs[s] = [h["tokens"].tolist() for chunk in chunks[r::rounds] for h in t.translate_tokens(chunk, batch)]
        seconds[s] += time.perf_counter() - start
        iterations[s] += g.stats.loop_iterations - before
    assert all(o == outputs[0.0] for o in outputs.values()), "outputs differ"
for s in settings:
    print(f"--draft-confidence {s}: {seconds[s]:.2f} s, {iterations[s]} iterations, "
          f"{1e3 * seconds[s] / iterations[s]:.2f} ms/iteration, time vs 0: {seconds[s] / seconds[0.0]:.3f}")
