"""What would drafting autoregressively cost on this CPU?  (issue 12; see autoregressive_drafts.py for what it drafts)

Lossless SpecDec with the demo pair, batch 1, every iteration drafted, on the first N test2016 sentences (the first
20 warm up).  At each iteration the block drafter's call is timed as decoding runs it; then, on the same drafter cache,
k autoregressive steps are timed, each feeding the token drafted before and one mask query (what a cached
autoregressive drafter would run), and the cache is rolled back to the accepted prefix, so decoding goes on as before.
Prints both costs per iteration.

    RUNS=... python docs/experiments/autoregressive_step_cost.py [N]
"""
import sys
import time

import torch

torch.set_num_threads(1)
import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)

WARM_UP = 20


def main(n: int):
    translator = demo_pair.load(draft_length="fixed")
    generator = translator.generator
    drafter = generator.drafter
    decoder = drafter.model.decoder
    seconds = {"block call": 0.0, "autoregressive steps": 0.0}
    calls, steps = [0], [0]
    block_propose = type(drafter).propose

    def timed_propose(self, tokens, lengths, k):
        start = time.perf_counter()
        draft = block_propose(self, tokens, lengths, k)
        seconds["block call"] += time.perf_counter() - start
        cache, provisional = self.cache, tokens.clone()
        fed, length = cache.fed.clone(), cache.length
        trained, decoder.block_size = decoder.block_size, 1
        start = time.perf_counter()
        for j in range(k):
            token = cache.propose_logits(provisional, lengths + j, 1).argmax(-1)
            provisional[0, int(lengths[0]) + j] = token[0, 0]
        seconds["autoregressive steps"] += time.perf_counter() - start
        decoder.block_size = trained
        cache.fed, cache.length = fed, length  # back to the accepted prefix
        calls[0] += 1
        steps[0] += k
        return draft

    type(drafter).propose = timed_propose
    samples = demo_pair.samples(translator, n, "test")
    for i, sample in enumerate(samples):
        if i == WARM_UP:
            seconds.update({name: 0.0 for name in seconds})
            calls[0] = steps[0] = 0
        generator.generate(translator.models, sample)
    type(drafter).propose = block_propose
    print(f"{calls[0]} iterations of {n - WARM_UP} sentences: the block call {1e3 * seconds['block call'] / calls[0]:.3f} "
          f"ms; {steps[0] / calls[0]:.1f} autoregressive steps {1e3 * seconds['autoregressive steps'] / calls[0]:.3f} ms "
          f"({1e3 * seconds['autoregressive steps'] / steps[0]:.3f} ms a step)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
