"""How good must a drafter be for issue 12's 4.5 tokens per iteration?  From the records of
``draft_acceptance.py`` (lossless SpecDec, drafting every iteration, k = 10): the verifier's
acceptance of drafted position j given that positions before it were accepted, then the tokens per
iteration of a drafter whose every drafted token passes with the same probability alpha, simulated
on the same sentences' output lengths (a sentence ends at its EOS, so a perfect drafter gets the
``oracle`` row's figure, not k + 1).

    RUNS=... python docs/experiments/draft_acceptance.py checkpoints/demo/drafter.pt 1000 OUT.json test
    python docs/experiments/acceptance_model.py OUT.json
"""
import collections
import json
import random
import sys

K = 10


def conditional_acceptance(records):
    """{position j: (iterations that reached j, share of them whose draft j passed)}."""
    reached, passed = collections.Counter(), collections.Counter()
    for r in records:
        for j in range(min(r["a"] + 1, r["w"])):
            reached[j] += 1
            passed[j] += r["a"] > j
    return {j: (reached[j], passed[j] / reached[j]) for j in sorted(reached)}


def simulated_tokens_per_iteration(lengths, alpha, k=K, repeats=20, seed=0):
    """Mean tokens per iteration when each drafted token passes with probability ``alpha``
    (independently, until the first failure) and the verifier adds one; ``lengths``: output
    tokens per sentence, EOS included."""
    rng = random.Random(seed)
    iterations = tokens = 0
    for _ in range(repeats):
        for n in lengths:
            done = 0
            while done < n:
                accepted = 0
                while accepted < k and rng.random() < alpha:
                    accepted += 1
                gained = min(accepted + 1, n - done)
                done += gained
                iterations += 1
                tokens += gained
    return tokens / iterations


def main(path):
    records = json.load(open(path))
    lengths = list({tuple(r["out"]): len(r["out"]) for r in records}.values())
    print(f"{len(records)} iterations over {len(lengths)} sentences ({sum(lengths) / len(lengths):.2f} output "
          "tokens each, EOS included)")
    print("drafted position j: iterations reaching it, share passing")
    for j, (reached, share) in conditional_acceptance(records).items():
        print(f"  {j + 1:2d}: {reached:5d}  {share:.3f}")
    print("alpha -> simulated tokens per iteration (k = 10)")
    for alpha in (0.70, 0.75, 0.80, 0.85, 0.88, 0.90, 0.95, 1.0):
        print(f"  {alpha:.2f}: {simulated_tokens_per_iteration(lengths, alpha):.2f}")


if __name__ == "__main__":
    main(sys.argv[1])
