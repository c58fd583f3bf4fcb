"""specdec on the first N valid sentences with the verifier's lean layers run plainly (F.linear:
"float"), oneDNN-packed ("packed", the default), or F.linear under torch.compile(dynamic=True)
("compile"): warm-up time (compilation included), two timed passes; the outputs are saved to
/tmp/compile_loop_<mode>.json for comparison.  Run from the repository root:
RUNS=... python docs/experiments/compile_decoding_loop.py 60 float|packed|compile"""
import json, os, sys, time, torch
torch.set_num_threads(1)
from fairseq_plugins.api import Translator
from fairseq_plugins.decoding.fast_decoder import FastDecoderLayers, float_linear
RUNS = os.environ.get("RUNS", "../runs")
n, mode = int(sys.argv[1]), sys.argv[2]
t = Translator.load("checkpoints/demo/verifier.pt", RUNS + "/multi30k/bin", source_lang="en", target_lang="de",
                    decoding="specdec", drafter="checkpoints/demo/drafter.pt", draft_length="fixed")
lines = open(RUNS + "/multi30k/spm/valid.en").read().splitlines()[:n]
if mode != "packed":
    t.generator.verifier_linear = float_linear
if mode == "compile":
    FastDecoderLayers.forward = torch.compile(FastDecoderLayers.forward, dynamic=True)
start = time.perf_counter()
for line in lines[:10]:
    t.translate_tokens([line])
print("warm-up", f"{time.perf_counter() - start:.1f}s")
for r in range(2):
    start = time.perf_counter()
    outputs = [t.translate_tokens([line])[0]["tokens"].tolist() for line in lines]
    print(mode, "pass", r, f"{time.perf_counter() - start:.2f}s")
json.dump(outputs, open(f"/tmp/compile_loop_{mode}.json", "w"))
