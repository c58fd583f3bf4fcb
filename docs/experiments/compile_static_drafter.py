"""torch.compile (inductor, static shapes) of the drafter's proposal on a CPU: the ``--cuda-graphs`` static step
(``cuda_graphs.StaticDrafterStep``: fixed buffers, F.linear in float32, attention over the whole buffer) eager and
compiled, beside the ordinary cached proposal (``drafter_cache.DrafterCache.propose_logits``: float16-stored
products) after a prefix of 8 tokens with 4 new ones and 10 queries; then an attempt to compile the ordinary one,
whose float16-stored product (``torch.fbgemm_linear_fp16_weight``) dynamo cannot trace (no fake-tensor rule).
The best of 3 x 300 calls, one thread.  Run from the repository root: RUNS=... python
docs/experiments/compile_static_drafter.py
"""
import sys
import time

import torch

import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)
from fairseq_plugins.decoding.drafters import BatchStart

torch.set_num_threads(1)


def best_ms(fn, calls=300):
    for _ in range(20):
        fn()
    times = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls * 1e3)
    return min(times)


def main():
    t = demo_pair.load(draft_length="fixed", cuda_graphs="on")  # on a CPU: the static steps, run eagerly
    g = t.generator
    static, ordinary = g.drafter.static, g.drafter.ordinary
    net_input = demo_pair.samples(t, 1)[0]["net_input"]
    with torch.inference_mode():
        encoder_out = g.verifier.encoder(net_input["src_tokens"], src_lengths=net_input["src_lengths"])
        static.start(encoder_out)
        static.new_tokens[0, :4] = torch.tensor([5, 6, 7, 8])
        static.n_new.fill_(4)
        fed = static.fed.clone()

        def static_step(step):
            static.fed.copy_(fed)
            step()
        print(f"static step, eager: {best_ms(lambda: static_step(static.step)):.3f} ms")
        start = time.perf_counter()
        compiled = torch.compile(static.step, dynamic=False)
        static_step(compiled)
        print(f"static step, compiled in {time.perf_counter() - start:.1f} s: {best_ms(lambda: static_step(compiled)):.3f} ms")

        ordinary.start(BatchStart(net_input["src_tokens"], net_input["src_lengths"], 40, encoder_out))
        tokens = torch.full((1, 60), 1, dtype=torch.long)
        tokens[0, :12] = torch.arange(2, 14)
        ordinary.propose(tokens, torch.tensor([8]), 10)
        cache = ordinary.cache

        def propose(fn):
            cache.fed, cache.length = torch.tensor([8]), 8
            fn(tokens, torch.tensor([12]), 10)
        print(f"ordinary cached proposal, eager: {best_ms(lambda: propose(cache.propose_logits)):.3f} ms")
        try:
            propose(torch.compile(cache.propose_logits, dynamic=False))
        except Exception as error:  # dynamo's TorchRuntimeError on fbgemm's product
            print("ordinary cached proposal, compiled: " + str(error).splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
