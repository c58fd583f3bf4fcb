"""The verifier's block forward (one sentence, after a prefix of 8) at m = 1..66 tokens: median ms.
Run from the repository root: RUNS=... python docs/experiments/verifier_block_cost.py [ROUNDS]"""
import os, sys, time, statistics, torch
torch.set_num_threads(1)
from fairseq_plugins.api import Translator
from fairseq_plugins import inference
from fairseq_plugins.decoding.fast_encoder import encoder_function
from fairseq_plugins.decoding.incremental import VerifierCache
RUNS = os.environ.get("RUNS", "../runs")
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 60
t = Translator.load("checkpoints/demo/verifier.pt", RUNS + "/multi30k/bin", source_lang="en", target_lang="de",
                    decoding="specdec", drafter="checkpoints/demo/drafter.pt")
g = t.generator
src = inference.encode(t.task.source_dictionary, open(RUNS + "/multi30k/spm/test.en").read().splitlines()[5]).unsqueeze(0)
widths = [1, 6, 11, 16, 21, 31, 41, 66]
with torch.no_grad():
    enc = encoder_function(g.verifier.encoder, g.verifier_linear)(src, src_lengths=torch.tensor([src.numel()]))
    cache = VerifierCache(g.verifier, enc, 1, src.device, linear=g.verifier_linear)
    cache.forward_block(torch.full((1, 8), 5)); cache.rollback(torch.tensor([8]))
    times = {m: [] for m in widths}
    for _ in range(rounds):  # the widths take turns
        for m in widths:
            start = time.perf_counter()
            cache.forward_block(torch.full((1, m), 7)); cache.rollback(torch.tensor([0]))
            times[m].append(time.perf_counter() - start)
for m in widths:
    print(f"m={m}: {1e3 * statistics.median(times[m]):.2f} ms")
