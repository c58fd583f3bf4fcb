"""A/B: PackedLinears/Int8Linears packing every weight (A) vs F.linear for weights up to argv[1] elements (B: verifier, C: verifier + drafter), 200 valid sentences, alternating rounds.  Measured at e100723, before fast_decoder.SMALL_WEIGHT (today A already keeps small weights on F.linear)."""
import os
RUNS = os.environ.get("RUNS", "../runs")  # where the recipes wrote multi30k/ (run from the repository root)
import sys, time, torch
torch.set_num_threads(1)
from fairseq_plugins.api import Translator
from fairseq_plugins import inference
import fairseq_plugins.decoding.fast_decoder as fd
t = Translator.load("checkpoints/demo/verifier.pt", RUNS + "/multi30k/bin", decoding="specdec", drafter="checkpoints/demo/drafter.pt",
                    source_lang="en", target_lang="de", max_len_a=1.2, max_len_b=10)
g = t.generator
lines = open(RUNS + "/multi30k/spm/valid.en").read().splitlines()
samples = []
for i in range(0, 1000, 5):
    src = inference.encode(t.task.source_dictionary, lines[i]).unsqueeze(0)
    samples.append({"net_input": {"src_tokens": src, "src_lengths": torch.tensor([src.numel()])}})
orig_call = fd.PackedLinears.__call__
LIMIT = int(sys.argv[1]) if len(sys.argv) > 1 else 65536
def small_plain(self, module, rows=0):
    if module.weight.numel() <= LIMIT:
        return fd.float_linear(module, rows)
    return orig_call(self, module, rows)
orig_int8 = fd.Int8Linears.__call__
def small_plain8(self, module, rows=0):
    if module.weight.numel() <= LIMIT:
        return fd.float_linear(module, rows)
    return orig_int8(self, module, rows)
res = {"A": [], "B": [], "C": []}
outs = {}
for r in range(6):
    for name in ("A", "B", "C"):
        fd.PackedLinears.__call__ = orig_call if name == "A" else small_plain
        fd.Int8Linears.__call__ = small_plain8 if name == "C" else orig_int8
        g.drafter.linear.packed.clear() if hasattr(g.drafter.linear, "packed") else None
        t0 = time.perf_counter()
        o = [g.generate(t.models, s)[0][0]["tokens"].tolist() for s in samples[r::6]]
        res[name].append(time.perf_counter() - t0)
        outs.setdefault((r, name), o)
    assert outs[(r, "A")] == outs[(r, "B")] == outs[(r, "C")], "outputs differ"
print({k: round(sum(v), 3) for k, v in res.items()}, "B/A", sum(res["B"]) / sum(res["A"]), "C/A", sum(res["C"]) / sum(res["A"]))
