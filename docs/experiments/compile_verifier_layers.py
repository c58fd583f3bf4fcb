"""torch.compile (inductor, static shapes) of the verifier's lean decoder layers + output
layer at m = 1 and 11 tokens after a cache of 20: median ms eager vs compiled, compile time,
largest log-prob difference.  Run from the repository root: RUNS=... python docs/experiments/compile_verifier_layers.py
On a GPU: DEVICE=cuda MODES=default,reduce-overhead (reduce-overhead: CUDA graphs); timing synchronises."""
import os, time, statistics, torch
import torch.nn.functional as F
torch.set_num_threads(1)
from fairseq_plugins.api import Translator
from fairseq_plugins import inference
from fairseq_plugins.decoding.fast_decoder import FastDecoderLayers, float_linear
RUNS = os.environ.get("RUNS", "../runs")
DEVICE = os.environ.get("DEVICE", "cpu")
MODES = os.environ.get("MODES", "default").split(",")
t = Translator.load("checkpoints/demo/verifier.pt", RUNS + "/multi30k/bin", source_lang="en", target_lang="de",
                    decoding="specdec", drafter="checkpoints/demo/drafter.pt", device=DEVICE)
verifier = t.generator.verifier
src = inference.encode(t.task.source_dictionary, open(RUNS + "/multi30k/spm/test.en").readline().strip()).unsqueeze(0).to(DEVICE)
with torch.no_grad():
    encoder_out = verifier.encoder(src, src_lengths=torch.tensor([src.numel()], device=DEVICE))
    layers = FastDecoderLayers(verifier.decoder, encoder_out, 1, verifier.decoder.embed_tokens.weight, float_linear)
    weight = verifier.decoder.output_projection.weight
    for layer in layers.layers:
        layer.ensure_capacity(64)

    def step(x, cached: int):
        return F.log_softmax(F.linear(layers.forward(x, None, cached, cached), weight), -1)

    def synchronize():
        if DEVICE == "cuda":
            torch.cuda.synchronize()

    def median_ms(f, x):
        for _ in range(5):
            f(x, 20)
        times = []
        for _ in range(300):
            synchronize(); start = time.perf_counter(); f(x, 20); synchronize()
            times.append(time.perf_counter() - start)
        return 1e3 * statistics.median(times)

    for mode in MODES:
        compiled = torch.compile(step, dynamic=False, mode=None if mode == "default" else mode)
        for m in (1, 11):
            x = torch.randn(m, 1, 256, device=DEVICE)
            eager = median_ms(step, x)
            synchronize(); start = time.perf_counter(); compiled(x, 20); synchronize()
            compile_s = time.perf_counter() - start
            print(f"{DEVICE} {mode} m={m}: eager {eager:.3f} ms, compiled {median_ms(compiled, x):.3f} ms "
                  f"(compiled in {compile_s:.0f} s), largest difference "
                  f"{(step(x, 20) - compiled(x, 20)).abs().max():.2e}", flush=True)
