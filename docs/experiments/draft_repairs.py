"""Can a drafted block be repaired after the drafter, before the verifier, so that more of it passes?  Counted on the
records of ``draft_acceptance.py`` (lossless SpecDec, drafting every iteration, k = 10): each record holds the
block d, the drafter's top-1 probability p and second choice at every position, and the verifier's greedy output,
so the drafts a repaired block would get accepted are exact for that iteration (later iterations are not replayed).

    RUNS=... python docs/experiments/draft_acceptance.py checkpoints/demo/drafter.pt 1014 OUT.json valid
    python docs/experiments/draft_repairs.py OUT.json

Repairs: ``dedupe`` (a token equal to the one before it, the block NAT's typical error, replaced by the drafter's
second choice, all such positions or only where p < t), ``collapse`` (repeats dropped, the rest moved up), ``swap``
(the least confident position's second choice verified as a second branch: the tokens that branch adds to the
verifier's block are counted), and the ceiling of one swap: the second choice at the first rejected position.
"""
import json
import sys


def leading_matches(drafts, target):
    n = 0
    for drafted, wanted in zip(drafts, target):
        if drafted != wanted:
            break
        n += 1
    return n


def accepted(record, drafts):
    """Drafts of ``drafts`` the verifier accepts in the record's iteration."""
    start = record["len"] - 1  # column 0 of the core's tokens is EOS; ``out`` starts at column 1
    return leading_matches(drafts, record["out"][start:start + len(record["d"])])


def dedupe(below=1.01):
    def repair(record):
        d, second, p = record["d"], record["top2"], record["p"]
        return [second[j] if j > 0 and d[j] == d[j - 1] and p[j] < below else d[j] for j in range(len(d))]
    return repair


def collapse(below=1.01):
    def repair(record):
        d, p = record["d"], record["p"]
        return [d[j] for j in range(len(d)) if j == 0 or d[j] != d[j - 1] or p[j] >= below]
    return repair


def swap_least_confident(record):
    """(accepted with the better of the two branches, tokens the second branch adds)."""
    d, second, p = record["d"], record["top2"], record["p"]
    j = min(range(len(d)), key=lambda i: p[i])
    branch = d[:j] + [second[j]] + d[j + 1:]
    return max(accepted(record, d), accepted(record, branch)), len(d) - j


def swap_at_first_rejection(record):
    d, second = record["d"], record["top2"]
    a = accepted(record, d)
    if a == len(d):
        return a
    return max(a, accepted(record, d[:a] + [second[a]] + d[a + 1:]))


def main(path):
    records = [r for r in json.load(open(path)) if r["d"]]
    n = len(records)
    base = sum(accepted(r, r["d"]) for r in records) / n
    print(f"{n} drafted iterations; accepted drafts per iteration (tokens per iteration - 1): {base:.3f}")
    rows = [("dedupe, every repeat", dedupe())] + [(f"dedupe where p < {t}", dedupe(t)) for t in (0.3, 0.5, 0.7, 0.9)]
    rows += [("collapse, every repeat", collapse())] + [(f"collapse where p < {t}", collapse(t)) for t in (0.5, 0.7)]
    for label, repair in rows:
        print(f"{label:28s} {sum(accepted(r, repair(r)) for r in records) / n:.3f}")
    swapped = [swap_least_confident(r) for r in records]
    print(f"{'swap, least confident':28s} {sum(a for a, _ in swapped) / n:.3f} "
          f"(+{sum(extra for _, extra in swapped) / n:.2f} tokens verified per iteration)")
    print(f"{'ceiling: swap at rejection':28s} {sum(swap_at_first_rejection(r) for r in records) / n:.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
