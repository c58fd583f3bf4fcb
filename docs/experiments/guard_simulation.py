"""The draft-length guard (``DraftGuard``) on a simulated clock: how often it switches the
drafter off when a drafted iteration costs DRAFTED ms and gains tokens drawn from a measured
distribution, and an undrafted one costs PLAIN ms for one token (each with +-NOISE relative
jitter); 8 seeds of 3,000 one-row iterations.  With BURST_P BURST_LEN SLOW, bursts (starting with
probability BURST_P per iteration, BURST_LEN iterations long) make drafted iterations SLOW times slower,
as another process's GPU work can (a drafted iteration launches and waits on more kernels).

    python docs/experiments/guard_simulation.py 7.4 3.2 [NOISE [BURST_P BURST_LEN SLOW]]

The default distribution is the H200 run's `specdec:length=adaptive` row (tokens gained per
iteration, README GPU section); 7.4 / 3.2 ms are that run's drafted / undrafted iteration costs
as estimated from the rows' totals.
"""
import random
import sys

from fairseq_plugins.decoding.draft_length import DraftGuard

H200_TOKENS = {1: 65, 2: 90, 3: 63, 4: 22, 5: 15, 6: 8, 7: 8, 8: 10, 9: 5, 10: 2, 11: 3}


def simulate(seed, drafted_ms, plain_ms, noise, bursts=(0.0, 0, 1.0), iterations=3000, tokens=H200_TOKENS):
    """-> (share of iterations without a draft, tokens per ms, tokens per ms drafting always)."""
    rng = random.Random(seed)
    burst_p, burst_len, slow = bursts
    burst_left = 0
    gains = [gain for gain, count in tokens.items() for _ in range(count)]
    now = [0.0]
    guard = DraftGuard(clock=lambda: now[0], skip_catch_up=True)
    undrafted = total_tokens = 0
    for _ in range(iterations):
        drafting = guard.start_iteration()
        if burst_left == 0 and rng.random() < burst_p:
            burst_left = burst_len
        in_burst, burst_left = burst_left > 0, max(burst_left - 1, 0)
        cost = (drafted_ms * (slow if in_burst else 1) if drafting else plain_ms) * (1 + noise * rng.uniform(-1, 1))
        gained = rng.choice(gains) if drafting else 1
        now[0] += cost
        undrafted += not drafting
        total_tokens += gained
        guard.end_iteration(gained)
    always = (sum(gains) / len(gains)) / (drafted_ms * (1 + burst_p * burst_len * (slow - 1)))  # ~ bursts' share
    return undrafted / iterations, total_tokens / now[0], always


def main(argv):
    drafted_ms, plain_ms = float(argv[0]), float(argv[1])
    noise = float(argv[2]) if len(argv) > 2 else 0.1
    bursts = (float(argv[3]), int(argv[4]), float(argv[5])) if len(argv) > 5 else (0.0, 0, 1.0)
    runs = [simulate(seed, drafted_ms, plain_ms, noise, bursts) for seed in range(8)]
    off, rate, always = (sum(run[i] for run in runs) / len(runs) for i in range(3))
    print(f"drafted {drafted_ms} ms, undrafted {plain_ms} ms, noise {noise}, bursts {bursts}: drafter off in {off:.0%} of the "
          f"iterations; {rate:.3f} tokens/ms (drafting always {always:.3f}, never {1 / plain_ms:.3f})")


if __name__ == "__main__":
    main(sys.argv[1:])
