"""One verifier step (m tokens after a prefix of 8): median time and per-op profile."""
import os, sys, time, statistics, torch
RUNS = os.environ.get("RUNS", "../runs")  # where the recipes wrote multi30k/ (run from the repository root)
torch.set_num_threads(1)
from torch.profiler import profile, ProfilerActivity
from fairseq_plugins.api import Translator
from fairseq_plugins import inference
from fairseq_plugins.decoding.fast_encoder import encoder_function
from fairseq_plugins.decoding.incremental import VerifierCache
m = int(sys.argv[1]) if len(sys.argv) > 1 else 1
t = Translator.load("checkpoints/demo/verifier.pt", RUNS + "/multi30k/bin", source_lang="en", target_lang="de",
                    decoding="specdec", drafter="checkpoints/demo/drafter.pt", draft_length="fixed")
g = t.generator
line = open(RUNS + "/multi30k/spm/test.en").read().splitlines()[5]
src = inference.encode(t.task.source_dictionary, line).unsqueeze(0)
with torch.no_grad():
    enc = encoder_function(g.verifier.encoder, g.verifier_linear)(src, src_lengths=torch.tensor([src.numel()]))
    def one():
        cache = VerifierCache(g.verifier, enc, 1, src.device, linear=g.verifier_linear)
        cache.forward_block(torch.full((1, 8), 5)); cache.rollback(torch.tensor([8]))
        ts = []
        for i in range(6):
            t0 = time.perf_counter()
            lp, h = cache.forward_block(torch.full((1, m), 7)); cache.rollback(torch.tensor([1]))
            ts.append(time.perf_counter() - t0)
        return ts
    for _ in range(30): one()
    ts = [x for _ in range(200) for x in one()]
    print(f"m={m}: median {1e3 * statistics.median(ts):.3f} ms")
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(50): one()
print(prof.key_averages(group_by_input_shape=True).table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=30, max_shapes_column_width=60))
