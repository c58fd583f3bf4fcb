"""Per iteration of the draft-length guard on test2016: choice, tokens, seconds (one process, batch 1).

    RUNS=... python docs/experiments/guard_trace.py PASSES OUT.json [cpu|cuda [SENTENCES]]   (needs $RUNS/multi30k/bin and spm/test.en)
    python docs/experiments/guard_trace.py --summary OUT.json    (drafted vs undrafted iterations of a saved trace)
"""
import json, statistics, sys, time, torch


def summary(log):
    """Per choice (drafted or not): iterations, tokens per iteration, median / mean ms, ms per token."""
    for drafting in (True, False):
        rows = [r for r in log if r[1] == drafting]
        if rows:
            seconds, tokens = [r[3] for r in rows], sum(r[2] for r in rows)
            print(f"{'drafted' if drafting else 'not drafted'}: {len(rows)} of {len(log)} iterations, "
                  f"{tokens / len(rows):.2f} tokens each, median {1e3 * statistics.median(seconds):.2f} ms, "
                  f"mean {1e3 * sum(seconds) / len(rows):.2f} ms, {1e3 * sum(seconds) / tokens:.2f} ms per token")


if sys.argv[1:2] == ["--summary"]:
    summary(json.load(open(sys.argv[2]))["log"])
    sys.exit()
torch.set_num_threads(1)
from fairseq_plugins.api import Translator
from fairseq_plugins import inference
from fairseq_plugins.decoding import draft_length
import os
RUNS = os.environ.get("RUNS", "../runs")  # where the recipes wrote multi30k/ (run from the repository root)
passes = int(sys.argv[1]) if len(sys.argv) > 1 else 1
out_path = sys.argv[2] if len(sys.argv) > 2 else "guard_trace.json"
device = sys.argv[3] if len(sys.argv) > 3 else "cpu"
sentences = int(sys.argv[4]) if len(sys.argv) > 4 else None
t = Translator.load("checkpoints/demo/verifier.pt", RUNS + "/multi30k/bin", drafter="checkpoints/demo/drafter.pt",
                    decoding="specdec", source_lang="en", target_lang="de", max_len_a=1.2, max_len_b=10,
                    draft_length="measured", device=device)
g = t.generator
log = []
orig_record = draft_length.MeasuredChoice.record
def record(self, drafting, tokens, seconds):
    log.append((self.iteration, drafting, tokens, seconds, g.guard.catching_up))
    orig_record(self, drafting, tokens, seconds)
draft_length.MeasuredChoice.record = record
orig_end = draft_length.DraftGuard.end_iteration
def end_iteration(self, tokens):
    if self.catching_up:
        log.append((self.current.iteration, True, tokens, self.clock() - self.started, True))
    orig_end(self, tokens)
draft_length.DraftGuard.end_iteration = end_iteration
lines = open(f"{RUNS}/multi30k/spm/test.en").read().splitlines()[:sentences]
sent_starts = []
t0 = time.perf_counter()
for p in range(passes):
    for line in lines:
        sent_starts.append(len(log))
        src = inference.encode(t.task.source_dictionary, line).unsqueeze(0).to(device)
        sample = {"net_input": {"src_tokens": src, "src_lengths": torch.tensor([src.numel()], device=device)}}
        g.generate(t.models, sample)
    print(f"pass {p}: {time.perf_counter() - t0:.1f} s, drafted {sum(r[1] for r in log)}/{len(log)}", flush=True)
json.dump({"log": log, "sent_starts": sent_starts}, open(out_path, "w"))
summary(log)
