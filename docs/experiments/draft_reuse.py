"""Simulated exactly on the teacher-forced drafts that draft_strategies.py saved: after a
rejection at position n, verify the same draft's leftovers d_{n+1..} after the verifier's
token in the next iteration instead of calling the drafter (its block predictions did not
depend on d_n), saving the drafter's share of that iteration.  Cost model in greedy steps:
an iteration FRESH, one without the drafter FRESH - DRAFTER (docs/results.md's profiles).
Run from the repository root after draft_strategies.py: RUNS=... python docs/experiments/draft_reuse.py [N_SENT]"""
import json
from draft_strategies import CACHE, matched, useful  # the drafts, their N_SENT (argv[1]) and their helpers

FRESH, DRAFTER = 1.72, 0.55
data = json.load(open(CACHE))


def run(min_left, only_if_alternative):
    """Tokens per iteration, share of iterations without the drafter, tokens per greedy step."""
    fresh = reused = tokens = 0
    for s in data:
        y, top, p, left = s["y"], s["top"], 0, None
        while p < len(y):
            reuse = left is not None and len(left) >= min_left
            main = [t[0] for t in top[p]]
            draft = left if reuse else main[:useful(main)]
            n = matched(draft, y, p)
            step = min(n + 1, len(y) - p)
            left = None
            if not reuse and n < len(draft) and p + n < len(y):
                if not only_if_alternative or top[p][n][1] == y[p + n]:  # the verifier took the drafter's 2nd choice
                    left = draft[n + 1:]
            fresh, reused, tokens, p = fresh + (not reuse), reused + reuse, tokens + step, p + step
    return tokens / (fresh + reused), reused / (fresh + reused), tokens / (fresh * FRESH + reused * (FRESH - DRAFTER))


base = run(10 ** 9, False)[2]
print("| reuse the leftovers | tokens / iteration | iterations without the drafter | tokens per greedy step vs always drafting |")
print("|---|---|---|---|")
print(f"| never | {run(10 ** 9, False)[0]:.2f} | 0 | 1.000 |")
for min_left in (1, 3, 5):
    for only_if in (False, True):
        tok, share, rate = run(min_left, only_if)
        when = f">= {min_left} left" + (", the verifier's token was the drafter's 2nd choice" if only_if else "")
        print(f"| {when} | {tok:.2f} | {share:.2f} | {rate / base:.3f} |")
