"""Where each section of a SpecDec iteration spends its CPU time, by tensor operation (torch profiler).

``op_count.py`` counts the operations each section dispatches; this times them: the core's profile sections
(encoder, drafter, verifier, accept) become ``record_function`` ranges, and each range's time is split by the
operations called directly inside it (their total times, children included).  The profiler adds its own cost
per operation, so read the shares, not the absolute milliseconds.

    RUNS=... python docs/experiments/section_ops_profile.py [SENTENCES] [DECODING] [TOP]

The demo pair, the first SENTENCES (default 100) test2016 sentences, batch 1, one thread.
"""
import argparse
import collections
import sys

import torch
from torch.profiler import ProfilerActivity, profile, record_function

torch.set_num_threads(1)
import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)

SECTIONS = ("encoder", "drafter", "verifier", "accept")


class Ranges:
    """The core's profiler interface, each section a profiler range; counts iterations."""

    def __init__(self):
        self.iterations = 0

    def section(self, name):
        return record_function(name)

    def tick(self):
        self.iterations += 1


def split_by_operation(events):
    """{section: total µs}, {section: Counter(operation -> µs)} over the profiler's event tree."""
    totals, by_op = collections.Counter(), collections.defaultdict(collections.Counter)

    def walk(event, section):
        if event.name in SECTIONS:
            totals[event.name] += event.cpu_time_total
            section = event.name
        elif section is not None:
            by_op[section][event.name] += event.cpu_time_total
            return
        for child in event.cpu_children:
            walk(child, section)

    for event in events:
        if event.cpu_parent is None:
            walk(event, None)
    return totals, by_op


def main(argv):
    parser = argparse.ArgumentParser(description="each SpecDec section's CPU time by tensor operation")
    parser.add_argument("sentences", type=int, nargs="?", default=100)
    parser.add_argument("decoding", nargs="?", default="specdec")
    parser.add_argument("top", type=int, nargs="?", default=6, help="operations shown per section")
    args = parser.parse_args(argv)
    n, decoding, top = args.sentences, args.decoding, args.top
    translator = demo_pair.load(decoding=decoding, sentencepiece_model="checkpoints/demo/sentencepiece.model")
    sentences = demo_pair.raw_sentences(n)
    translator.translate(sentences[:5])  # warm-up: lean layers built once
    ranges = Ranges()
    translator.generator.profiler = ranges
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        translator.translate(sentences)
    totals, by_op = split_by_operation(prof.events())
    it = ranges.iterations
    print(f"{decoding}, {n} sentences, {it} iterations; ms per iteration (encoder: per sentence), "
          "the largest operations' shares")
    for section in SECTIONS:
        per = n if section == "encoder" else it
        shares = ", ".join(f"{name.replace('aten::', '')} {100 * us / totals[section]:.0f} %"
                           for name, us in by_op[section].most_common(top))
        print(f"{section}: {totals[section] / 1000 / per:.2f} ms; {shares}")


if __name__ == "__main__":
    main(sys.argv[1:])
