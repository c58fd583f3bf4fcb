"""Where a drafted SpecDec iteration goes (demo pair, lossless, batch 1, drafting every iteration, one thread).

    RUNS=... python docs/experiments/iteration_profile.py timers 300    # ms per call of the core's parts
    RUNS=... python docs/experiments/iteration_profile.py ops 50        # tensor operations per iteration, by part
    RUNS=... python docs/experiments/iteration_profile.py profiler 100  # torch.profiler, operators by self time

``timers`` wraps whichever of the functions below the checked-out package has (the names of 7f1f4cf and of
later commits), so the same command profiles the code before and after the session of 2026-11-26 (fourth)
changed them (the loop runs in whatever grad mode the package's generator chooses).  Each mode decodes 10
(timers: 20) valid sentences first, then the next N.
"""
import collections
import contextlib
import functools
import sys
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)
from fairseq_plugins.decoding import acceptance, core, fast_decoder, incremental, specdec
from fairseq_plugins.models import drafter_cache

torch.set_num_threads(1)
mode, count = sys.argv[1], int(sys.argv[2])
t = demo_pair.load(draft_length="fixed", sentencepiece_model="checkpoints/demo/sentencepiece.model")
lines = open(demo_pair.RUNS + "/m30raw/valid.en").read().splitlines()
warmup = 20 if mode == "timers" else 10
for line in lines[:warmup]:
    t.translate([line])
sentences = lines[warmup:warmup + count]


def decode():
    start = time.perf_counter()
    for line in sentences:
        t.translate([line])
    print(f"wall {time.perf_counter() - start:.2f} s for {len(sentences)} sentences")


if mode == "timers":
    seconds, calls = collections.Counter(), collections.Counter()

    def timed(owner, name, label):
        original = getattr(owner, name)

        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                seconds[label] += time.perf_counter() - start
                calls[label] += 1
        setattr(owner, name, wrapper)

    targets = [(core.SpeculativeGenerator, ["_draft", "_verify", "_accept", "_append", "_retire"]),
               (specdec.BlockDrafter, ["propose", "start"]),
               (drafter_cache.DrafterCache, ["propose_log_probs", "propose_logits", "_check_prefix_grew", "_block_tokens",
                                             "_embed", "_embed_prefix", "_log_probs", "_logits"]),
               (getattr(drafter_cache, "QueryTable", None), ["gather"]),
               (incremental.VerifierCache, ["forward_block", "_embed", "rollback"]),
               (acceptance, ["apply_limits", "cumulative_scores", "verifier_choices"])]
    for owner, names in targets:
        for name in names:
            if owner is not None and hasattr(owner, name):
                timed(owner, name, f"{getattr(owner, '__name__', owner)}.{name}")
    layers_forward = fast_decoder.FastDecoderLayers.forward

    def layers(self, *args, **kwargs):  # the drafter's (2) and the verifier's (3) lean layers apart
        start = time.perf_counter()
        out = layers_forward(self, *args, **kwargs)
        label = f"lean layers ({len(self.layers)})"
        seconds[label] += time.perf_counter() - start
        calls[label] += 1
        return out
    fast_decoder.FastDecoderLayers.forward = layers
    decode()
    for label, total in seconds.most_common():
        print(f"{label:50s} {total:7.3f} s {calls[label]:6d} calls {1e3 * total / calls[label]:.3f} ms")
elif mode == "ops":
    part, counts = ["loop"], collections.Counter()

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            counts[part[0]] += 1
            return func(*args, **(kwargs or {}))

    class Sections:
        def tick(self):
            counts["iterations"] += 1

        @contextlib.contextmanager
        def section(self, name):
            outer, part[0] = part[0], name
            try:
                yield
            finally:
                part[0] = outer
    t.generator.profiler = Sections()
    with Count():
        decode()
    for name, n in counts.items():
        if name != "iterations":
            print(f"{name:10s} {n / counts['iterations']:7.1f} operations per iteration")
else:
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        decode()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=40))
