"""Mean width of the verifier's block (drafted tokens verified per iteration) and median verify ms by
width, specdec, batch 1, the first N valid sentences.  Extra arguments: --draft-confidence values to
compare (only at b2ba164/eab15c4, where the option existed).  Run from the repository root:
RUNS=... python docs/experiments/verified_width.py [N [P ...]]"""
import dataclasses, os, statistics, sys, time, torch
torch.set_num_threads(1)
from fairseq_plugins.api import Translator
RUNS = os.environ.get("RUNS", "../runs")
n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
thresholds = [float(a) for a in sys.argv[2:]] or [None]
t = Translator.load("checkpoints/demo/verifier.pt", RUNS + "/multi30k/bin", decoding="specdec",
                    drafter="checkpoints/demo/drafter.pt", source_lang="en", target_lang="de", max_len_a=1.2, max_len_b=10)
g = t.generator
lines = open(RUNS + "/multi30k/spm/valid.en").read().splitlines()[:n]
verify, records = g._verify, []


def timed_verify(cache, state, drafts, limits):
    start = time.perf_counter()
    out = verify(cache, state, drafts, limits)
    records.append((drafts.size(1), time.perf_counter() - start))
    return out


g._verify = timed_verify
for threshold in thresholds * 2:  # each setting twice, in turns
    if threshold is not None:
        g.cfg = dataclasses.replace(g.cfg, draft_confidence=threshold)
    records.clear()
    t.translate_tokens(lines)
    by_width = {}
    for width, seconds in records:
        by_width.setdefault(width, []).append(seconds)
    print(f"P={threshold}: mean width {sum(w for w, _ in records) / len(records):.2f}, mean verify "
          f"{1e3 * sum(s for _, s in records) / len(records):.2f} ms; median ms by width "
          f"{ {w: round(1e3 * statistics.median(s), 2) for w, s in sorted(by_width.items()) if len(s) > 20} }")
