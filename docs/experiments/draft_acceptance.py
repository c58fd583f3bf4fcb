"""Per iteration: the drafter's max prob at each drafted position and how many drafts the verifier accepted."""
import os
RUNS = os.environ.get("RUNS", "../runs")  # where the recipes wrote multi30k/ (run from the repository root)
import sys, json, torch
torch.set_num_threads(1)
from fairseq_plugins.api import Translator

drafter = sys.argv[1] if len(sys.argv) > 1 else "checkpoints/demo/drafter.pt"
n_sent = int(sys.argv[2]) if len(sys.argv) > 2 else 300
t = Translator.load("checkpoints/demo/verifier.pt", RUNS + "/multi30k/bin", drafter=drafter, decoding="specdec",
                    source_lang="en", target_lang="de", max_len_a=1.2, max_len_b=10, draft_length="fixed")
g = t.generator
records = []
last = {}
orig_propose = g.drafter.propose
def propose(tokens, lengths, k):
    d = orig_propose(tokens, lengths, k)
    last["p"] = d.lprobs.exp().max(-1).values[0].tolist()
    last["top2"] = d.lprobs[0].topk(2, -1).indices[:, 1].tolist()
    return d
g.drafter.propose = propose
orig_accept = g._accept
def accept(state, drafts, lprobs, hidden):
    step, new_cum, done = orig_accept(state, drafts, lprobs, hidden)
    n_acc = int((drafts[0] == step.choices[0, :drafts.size(1)]).long().cumprod(0).sum())
    records.append({"p": last.get("p", [])[:drafts.size(1)], "a": n_acc, "w": drafts.size(1),
                    "d": drafts[0].tolist(), "len": int(state.lengths[0]), "top2": last.get("top2")})
    return step, new_cum, done
g._accept = accept
from fairseq_plugins import inference
lines = open(f"{RUNS}/multi30k/spm/{sys.argv[4] if len(sys.argv) > 4 else 'valid'}.en").read().splitlines()
for i in range(0, len(lines), max(1, len(lines) // n_sent)):
    src = inference.encode(t.task.source_dictionary, lines[i]).unsqueeze(0)
    sample = {"net_input": {"src_tokens": src, "src_lengths": torch.tensor([src.numel()])}}
    start = len(records)
    out = g.generate(t.models, sample)[0][0]["tokens"].tolist()
    for r in records[start:]:
        r["out"] = out
json.dump(records, open(sys.argv[3] if len(sys.argv) > 3 else RUNS + "/prof/conf.json", "w"))
print(len(records), sum(r["a"] + 1 for r in records) / len(records))
