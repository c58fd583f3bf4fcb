"""Would the shipped drafter reach 4.5 tokens per iteration if it drafted autoregressively?  (issue 12)

``rejection_margins.py`` finds most failed drafts at a block's later positions, where the block drafter, predicting
its positions independently, follows another continuation than the verifier took before.  Here the same drafter
drafts one token at a time instead: each of the k tokens of a block is its first query's choice after the accepted
prefix plus the tokens it drafted before in the block (k uncached calls: a count, not a timing).  Every drafted
token then sees everything before it, as the block's first position always does.  Lossless SpecDec, batch 1, k = 10,
the first N sentences of a Multi30k split; prints tokens per iteration and the verifier's acceptance at each block
position given the positions before it passed, for the block drafter and for the autoregressive use of it, and
asserts equal outputs (both are greedy's).  QUERIES: the mask queries each autoregressive call runs (default: the
drafter's trained 10, of which the first is read; 1 is what a cached autoregressive step would run).

    RUNS=... [QUERIES=1] python docs/experiments/autoregressive_drafts.py [N] [SPLIT]
"""
import os
import sys

import torch

torch.set_num_threads(1)
import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)

from fairseq_plugins.decoding.specdec import BlockDrafter


class AutoregressiveDrafter(BlockDrafter):
    """The block drafter, uncached, drafting k tokens one call of ``queries`` mask queries at a time (batch 1)."""

    def __init__(self, model, queries: int, **options):
        super().__init__(model, cached=False, **options)
        self.queries = queries

    def propose(self, tokens, lengths, k):
        tokens, length = tokens.clone(), int(lengths[0])
        decoder = self.model.decoder
        trained, decoder.block_size = decoder.block_size, self.queries
        try:
            for j in range(k):
                draft = super().propose(tokens, lengths + j, 1)
                tokens[0, length + j] = draft.tokens[0, 0]
        finally:
            decoder.block_size = trained
        return tokens[:, length:length + k]


def main(n: int, split: str):
    sources = demo_pair.raw_sentences(n, split)
    translator = demo_pair.load(draft_length="fixed", sentencepiece_model="checkpoints/demo/sentencepiece.model")
    block = translator.generator.drafter
    queries = int(os.environ.get("QUERIES", block.model.decoder.block_size))
    autoregressive = AutoregressiveDrafter(block.model, queries, vocab_limit=block.vocab_limit)
    results = {name: demo_pair.decode_with(translator, sources, drafter)
               for name, drafter in (("block drafter", block), ("the same, autoregressive", autoregressive))}
    outputs = [lines for lines, _, _ in results.values()]
    assert outputs[0] == outputs[1], "the outputs differ: both must be greedy's"
    for name, (_, tokens, rate) in results.items():
        shares = ", ".join(f"{j + 1}: {share:.0%}" for j, (_, share) in rate.items())
        print(f"{name}: {tokens:.3f} tokens per iteration; passed at position (given the ones before): {shares}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10 ** 6, sys.argv[2] if len(sys.argv) > 2 else "test")
