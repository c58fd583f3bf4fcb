"""What an iteration costs besides arithmetic: a SpecDec iteration and a stock greedy step on models of the demo
pair's depth (3+3-layer verifier, 2-layer drafter, k = 10) but width 8, where the products cost next to nothing, so
what is left is the host code (operator dispatch and the Python around it).  Random weights (float16 numbers), random
13-token sources, outputs of 15 tokens; one thread.  The verifier's products run as ``F.linear`` here (the demo's
float16-stored ones cost about the same at this width).

    python docs/experiments/host_floor.py      # from the repository root; pause background trainings first
"""
import sys
import time

import torch

torch.set_num_threads(1)
sys.path.insert(0, "tests")  # the test suite's tiny-model builders
from fairseq.sequence_generator import SequenceGenerator  # noqa: E402

from drafter_helpers import build_drafter, build_verifier, make_dictionary  # noqa: E402
from fairseq_plugins.bench.profile import TimingProfiler  # noqa: E402
from fairseq_plugins.decoding.core import SpeculativeConfig, SpeculativeGenerator  # noqa: E402
from fairseq_plugins.decoding.fast_decoder import float32_linears  # noqa: E402
from fairseq_plugins.decoding.specdec import BlockDrafter  # noqa: E402
from tiny_models import make_batch, round_to_half  # noqa: E402

WIDTH_8 = dict(encoder_layers=3, decoder_layers=3, encoder_embed_dim=8, decoder_embed_dim=8, encoder_ffn_embed_dim=16,
               decoder_ffn_embed_dim=16, encoder_attention_heads=2, decoder_attention_heads=2)


def build_generators(dictionary):
    """(verifier, SpecDec generator, stock greedy generator) on width-8 models of the demo pair's depth."""
    verifier = round_to_half(build_verifier(dictionary, seed=1, **WIDTH_8))
    drafter = round_to_half(build_drafter(dictionary, seed=2, **dict(WIDTH_8, decoder_layers=2, block_size=10)))
    adapter = BlockDrafter(drafter, linear=float32_linears(round_weights=True))
    spec = SpeculativeGenerator(verifier, dictionary, adapter, SpeculativeConfig(block_size=10, max_len_b=15))
    greedy = SequenceGenerator([verifier], dictionary, beam_size=1, max_len_b=15, max_len_a=0)
    return verifier, spec, greedy


def ms_per_step(generator, verifier, batches, count_iterations: bool):
    """(ms per iteration (SpecDec) or per output token (greedy), steps per sentence), after 10 warm-up sentences."""
    for batch in batches[:10]:
        generator.generate([verifier], batch)
    start, steps = time.perf_counter(), 0
    for batch in batches:
        hypo = generator.generate([verifier], batch)[0][0]
        steps += len(hypo["accepted_per_iteration"]) if count_iterations else hypo["tokens"].numel()
    return (time.perf_counter() - start) / steps * 1e3, steps / len(batches)


def main():
    dictionary = make_dictionary(200)
    verifier, spec, greedy = build_generators(dictionary)
    batches = [make_batch(dictionary, [13], seed=seed) for seed in range(200)]
    for name, generator, per_iteration in (("specdec (k=10, width 8)", spec, True),
                                           ("stock greedy (width 8)", greedy, False)):
        ms, steps = ms_per_step(generator, verifier, batches, per_iteration)
        print(f"{name}: {ms:.3f} ms per {'iteration' if per_iteration else 'step'} ({steps:.1f} per sentence)")
    spec.profiler = profiler = TimingProfiler("cpu")  # one more pass, its sections timed as --profile does
    ms_per_step(spec, verifier, batches, True)
    print("specdec sections, ms per iteration: " + ", ".join(
        f"{section} {seconds / profiler.iterations * 1e3:.3f}" for section, seconds in profiler.seconds.items()))


if __name__ == "__main__":
    main()
