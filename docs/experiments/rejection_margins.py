"""Where the shipped drafter's drafts fail: how sure was the verifier there?  (issue 12: 4.5 tokens per iteration)

Lossless SpecDec, batch 1, every iteration drafted, the demo pair, the first N sentences of a Multi30k split.  For
every drafted position the verifier judged (the accepted ones and the first rejected one of each iteration) it
records the verifier's probability of its own greedy choice there and the rank of the drafted token in the
verifier's distribution, then prints, for accepted and for rejected positions, how the verifier's top-1 probability
is spread, and for the rejected ones how often the drafted token was the verifier's second choice and how close it
came.  If the rejections fall where the verifier itself hesitates, a better drafter must guess the verifier's
near-ties, not learn more of the language.

    RUNS=... python docs/experiments/rejection_margins.py [N] [SPLIT]

Reads $RUNS/multi30k/bin and the raw sources $RUNS/m30raw/SPLIT.en (default: all of test, i.e. test2016).
"""
import math
import statistics
import sys

import torch

torch.set_num_threads(1)
import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)

BINS = (0.5, 0.7, 0.9, 1.01)  # upper edges of the verifier's top-1 probability bins


def judged_positions(drafts, choices, lprobs):
    """(accepted, first rejected or None) for one row, drafts (k,), choices (k+1,), lprobs (k+1, V): (the verifier's
    probability of its choice, of the draft, the draft's rank) at each drafted position the verifier judged; the
    rejected one also with its position in the block (0-based)."""
    accepted, rejected = [], None
    for j in range(drafts.size(0)):
        probs = lprobs[j].exp()
        top, drafted = float(probs[choices[j]]), float(probs[drafts[j]])
        rank = int((probs > probs[drafts[j]]).sum())  # 0: the verifier's own choice
        if int(drafts[j]) == int(choices[j]):
            accepted.append((top, drafted, rank))
        else:
            rejected = (top, drafted, rank, j)
            break
    return accepted, rejected


def bins():
    """(label, low, high) of each probability bin of BINS."""
    lows = (0.0,) + BINS[:-1]
    return [(f"[{low:.1f}, {min(high, 1.0):.1f}{']' if high > 1 else ')'}", low, high) for low, high in zip(lows, BINS)]


def spread(values):
    """Share of ``values`` in each bin of BINS, as text."""
    return ", ".join(f"{label} {sum(low <= v < high for v in values) / max(1, len(values)):.0%}"
                     for label, low, high in bins())


def main(n: int, split: str):
    sources = demo_pair.raw_sentences(n, split)
    translator = demo_pair.load(draft_length="fixed", sentencepiece_model="checkpoints/demo/sentencepiece.model")
    generator = translator.generator
    accepted, rejected = [], []
    assemble = generator._assemble

    def recording_assemble(state, drafts, n_accepted, cums, choices, choice_cums, lprobs, hidden):
        for row in range(drafts.size(0)):
            ok, failed = judged_positions(drafts[row], choices[row], lprobs[row])
            accepted.extend(ok)
            rejected.extend([failed] if failed is not None else [])
        return assemble(state, drafts, n_accepted, cums, choices, choice_cums, lprobs, hidden)

    generator._assemble = recording_assemble
    translator.translate(sources)
    iterations = sum(generator.stats.iterations)
    print(f"{len(sources)} {split} sentences, {iterations} iterations: {len(accepted)} drafted tokens accepted, "
          f"{len(rejected)} rejected (the first rejection of an iteration; the rest of its draft is not judged)")
    for outcome, records in (("passed", accepted), ("failed", rejected)):
        tops = [record[0] for record in records]
        print(f"verifier's top-1 probability where a draft {outcome}: median {statistics.median(tops):.3f}; "
              + spread(tops))
    second = sum(rank == 1 for _, _, rank, _ in rejected) / len(rejected)
    within_tau = sum(math.log(drafted) >= math.log(top) - 1 for top, drafted, _, _ in rejected) / len(rejected)
    print(f"failed drafts: the verifier's 2nd choice {second:.0%}; within 1 of its choice in log-probability (what "
          f"SpecDec++'s tau 1 tolerates) {within_tau:.0%}; median probability of the failed draft "
          f"{statistics.median(d for _, d, _, _ in rejected):.3f}")
    for name, where in (("the block's first position", lambda j: j == 0), ("a later position", lambda j: j > 0)):
        failed = [r for r in rejected if where(r[3])]
        second = sum(r[2] == 1 for r in failed) / len(failed)
        print(f"failed at {name}: {len(failed)}, the verifier's 2nd choice {second:.0%}, median probability of the "
              f"failed draft {statistics.median(r[1] for r in failed):.3f}, of the verifier's choice "
              f"{statistics.median(r[0] for r in failed):.3f}")
    for label, low, high in bins():
        passed = sum(low <= t < high for t, _, _ in accepted)
        judged = passed + sum(low <= t < high for t, _, _, _ in rejected)
        print(f"verifier's top-1 in {label}: {judged} judged drafts, {passed / max(1, judged):.0%} passed")

if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10 ** 6, sys.argv[2] if len(sys.argv) > 2 else "test")
