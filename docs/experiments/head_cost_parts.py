"""What the sequential head's ``HeadDrafting.draft`` costs in place, part by part: the demo pair decodes argv[1]
valid sentences (default 200) with lossless SpecDec at batch 1, one thread, after 20 warm-up sentences, while a copy
of ``draft`` with a clock between its steps stands in for it (the same operations; its drafts are asserted equal to
``draft``'s on every call).  Prints each part's median in µs and the sum.  The torch profiler is not used: on this CPU
it inflates small operations many times.  Run from the repository root:
``RUNS=... python docs/experiments/head_cost_parts.py 200``
"""
import statistics
import sys
import time

import torch

import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)
from fairseq_plugins.models import sequential_head

torch.set_num_threads(1)
PARTS = ["top m", "previous tokens", "lookup (inner)", "state product", "lookup (outer)", "batched products",
         "add block logits", "argmax", "walk", "gather"]
times = {part: [] for part in PARTS}
original = sequential_head.HeadDrafting.draft


def timed_draft(self, states, logits, last):
    clock = [time.perf_counter()]
    batch, k, state_dim = states.shape
    m = min(self.n_candidates, self.n_allowed)
    best_logits, candidates = logits.float().topk(m, dim=-1); clock.append(time.perf_counter())
    previous = torch.cat([last[:, None, None].expand(-1, 1, m), candidates[:, :-1]], dim=1); clock.append(time.perf_counter())
    hidden = self.token_inner.index_select(0, previous.reshape(-1)).view(batch * k, m, -1); clock.append(time.perf_counter())
    hidden += self.state_product(states.reshape(batch * k, state_dim).float())[:, None, :]; clock.append(time.perf_counter())
    outer = self.token_outer.index_select(0, candidates.reshape(-1)).view(batch * k, m, -1); clock.append(time.perf_counter())
    scores = torch.bmm(hidden.relu_(), outer.transpose(1, 2)); clock.append(time.perf_counter())
    scores += best_logits.reshape(batch * k, 1, m); clock.append(time.perf_counter())
    next_choice = scores.argmax(-1).view(batch, k, m); clock.append(time.perf_counter())
    chosen = sequential_head.walk(next_choice).to(candidates.device); clock.append(time.perf_counter())
    drafts = candidates.gather(-1, chosen[:, :, None]).squeeze(-1); clock.append(time.perf_counter())
    for part, start, end in zip(PARTS, clock, clock[1:]):
        times[part].append(end - start)
    assert torch.equal(drafts, original(self, states, logits, last))
    return drafts


count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
translator = demo_pair.load()
samples = demo_pair.samples(translator, count + 20)
generator = translator.generator
for sample in samples[:20]:
    generator.generate(translator.models, sample)
sequential_head.HeadDrafting.draft = timed_draft
for sample in samples[20:]:
    generator.generate(translator.models, sample)
medians = {part: statistics.median(values) * 1e6 for part, values in times.items()}
for part, value in medians.items():
    print(f"{part:18s} {value:6.1f} µs")
print(f"{'sum of medians':18s} {sum(medians.values()):6.1f} µs over {len(times['walk'])} calls")
