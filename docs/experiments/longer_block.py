"""Would a longer block draft more?  (issue 12: 4.5 tokens per iteration)

Lossless SpecDec on the first N Multi30k sentences of a split, batch 1, every iteration drafted, with the demo
drafter's mask queries set to K (it was trained with 10: queries past the 10th are untrained, and more queries
change what the first 10 see, since queries attend to each other).  Prints tokens per iteration and the histogram of
tokens gained per iteration: the iterations that gain K + 1 accepted the whole block, the most a longer block
(a drafter trained with a larger k) could add to.

    RUNS=... python docs/experiments/longer_block.py K [N] [SPLIT] [DRAFTER]

Reads $RUNS/multi30k/bin (README Results: the data command) and the raw sources $RUNS/m30raw/SPLIT.en (default
valid); writes the translations to $RUNS/longer_block/SPLIT-kK.txt (K = 10 and K = 16 must give the same lines:
the output is greedy's either way).
"""
import os
import sys

import torch

torch.set_num_threads(1)
import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)

RUNS = demo_pair.RUNS


def main(k: int, n: int, split: str, drafter: str):
    sources = demo_pair.raw_sentences(n, split)
    translator = demo_pair.load(drafter=drafter, draft_length="fixed",
                                sentencepiece_model="checkpoints/demo/sentencepiece.model")
    generator = translator.generator
    generator.drafter.model.decoder.block_size = k  # the queries the drafter runs (trained: 10)
    generator.cfg.block_size = k
    lines = translator.translate(sources)
    summary = generator.stats.summary()
    histogram = summary["histogram"]
    iterations = sum(histogram.values())
    whole = sum(count for gained, count in histogram.items() if gained >= k + 1)
    print(f"k = {k}, {len(sources)} {split} sentences: {summary['mean_accepted_per_iteration']:.3f} tokens per "
          f"iteration, {iterations} iterations, {whole} ({whole / iterations:.1%}) accepted the whole block")
    print(f"tokens gained per iteration: {histogram}")
    os.makedirs(f"{RUNS}/longer_block", exist_ok=True)
    with open(f"{RUNS}/longer_block/{split}-k{k}.txt", "w") as out:
        out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    args = sys.argv[1:]
    main(int(args[0]), int(args[1]) if len(args) > 1 else 10 ** 6, args[2] if len(args) > 2 else "valid",
         args[3] if len(args) > 3 else "checkpoints/demo/drafter.pt")
