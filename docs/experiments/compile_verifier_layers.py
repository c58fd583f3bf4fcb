"""torch.compile (inductor, CPU, static shapes) of the verifier's lean decoder layers + output
layer at m = 1 and 11 tokens after a cache of 20: median ms eager vs compiled, compile time,
largest log-prob difference.  Run from the repository root: RUNS=... python docs/experiments/compile_verifier_layers.py"""
import os, time, statistics, torch
import torch.nn.functional as F
torch.set_num_threads(1)
from fairseq_plugins.api import Translator
from fairseq_plugins import inference
from fairseq_plugins.decoding.fast_decoder import FastDecoderLayers, float_linear
RUNS = os.environ.get("RUNS", "../runs")
t = Translator.load("checkpoints/demo/verifier.pt", RUNS + "/multi30k/bin", source_lang="en", target_lang="de",
                    decoding="specdec", drafter="checkpoints/demo/drafter.pt")
verifier = t.generator.verifier
src = inference.encode(t.task.source_dictionary, open(RUNS + "/multi30k/spm/test.en").readline().strip()).unsqueeze(0)
with torch.no_grad():
    encoder_out = verifier.encoder(src, src_lengths=torch.tensor([src.numel()]))
    layers = FastDecoderLayers(verifier.decoder, encoder_out, 1, verifier.decoder.embed_tokens.weight, float_linear)
    weight = verifier.decoder.output_projection.weight
    for layer in layers.layers:
        layer.ensure_capacity(64)

    def step(x, cached: int):
        return F.log_softmax(F.linear(layers.forward(x, None, cached, cached), weight), -1)

    compiled = torch.compile(step, dynamic=False)

    def median_ms(f, x):
        for _ in range(5):
            f(x, 20)
        times = []
        for _ in range(300):
            start = time.perf_counter(); f(x, 20); times.append(time.perf_counter() - start)
        return 1e3 * statistics.median(times)

    for m in (1, 11):
        x = torch.randn(m, 1, 256)
        eager = median_ms(step, x)
        start = time.perf_counter(); compiled(x, 20); compile_s = time.perf_counter() - start
        print(f"m={m}: eager {eager:.3f} ms, compiled {median_ms(compiled, x):.3f} ms (compiled in {compile_s:.0f} s), "
              f"largest difference {(step(x, 20) - compiled(x, 20)).abs().max():.2e}")
