"""What an iteration costs besides arithmetic: a SpecDec iteration and a stock greedy step on models of the demo
pair's depth (3+3-layer verifier, 2-layer drafter, k = 10) but width 8, where the products cost next to nothing, so
what is left is the host code (operator dispatch and the Python around it).  Random weights (float16 numbers), random
13-token sources, outputs of 15 tokens; one thread.

    python docs/experiments/host_floor.py      # from the repository root; pause background trainings first
"""
import sys, time
sys.path.insert(0, "tests")
import torch
torch.set_num_threads(1)
from fairseq.sequence_generator import SequenceGenerator
from drafter_helpers import build_drafter, build_verifier, make_dictionary
from fairseq_plugins.bench.profile import TimingProfiler
from fairseq_plugins.decoding.core import SpeculativeConfig, SpeculativeGenerator
from fairseq_plugins.decoding.specdec import BlockDrafter
from fairseq_plugins.decoding.fast_decoder import float32_linears
from tiny_models import make_batch, round_to_half

D = make_dictionary(200)
size = dict(encoder_layers=3, decoder_layers=3, encoder_embed_dim=8, decoder_embed_dim=8, encoder_ffn_embed_dim=16,
            decoder_ffn_embed_dim=16, encoder_attention_heads=2, decoder_attention_heads=2)
verifier = round_to_half(build_verifier(D, seed=1, **size))
dsize = dict(size, decoder_layers=2, block_size=10)
drafter = round_to_half(build_drafter(D, seed=2, **dsize))
batches = [make_batch(D, [13], seed=s) for s in range(200)]
cfg = SpeculativeConfig(block_size=10, max_len_b=15, max_len_a=0.0)
spec = SpeculativeGenerator(verifier, D, BlockDrafter(drafter, linear=float32_linears(round_weights=True)), cfg)
greedy = SequenceGenerator([verifier], D, beam_size=1, max_len_b=15, max_len_a=0)

def run(gen, count_iters):
    for b in batches[:10]:
        gen.generate([verifier], b)
    t0 = time.perf_counter(); steps = 0
    for b in batches:
        out = gen.generate([verifier], b)
        h = out[0][0]
        steps += len(h["accepted_per_iteration"]) if count_iters else h["tokens"].numel()
    return (time.perf_counter() - t0) / steps * 1e3, steps / len(batches)

for name, gen, it in (("specdec (k=10, width 8)", spec, True), ("stock greedy (width 8)", greedy, False)):
    ms, per = run(gen, it)
    print(f"{name}: {ms:.3f} ms per {'iteration' if it else 'step'} ({per:.1f} per sentence)")

spec.profiler = profiler = TimingProfiler("cpu")  # one more pass, its sections timed
run(spec, True)
print("specdec sections, ms per iteration: " + ", ".join(
    f"{section} {seconds / profiler.iterations * 1e3:.3f}" for section, seconds in profiler.seconds.items()))
