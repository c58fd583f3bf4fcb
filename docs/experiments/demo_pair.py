"""What the A/B scripts here share: the demo pair loaded as the README's harness runs it,
batch-1 samples of a Multi30k split (``$RUNS/multi30k``, see docs/results.md), and decoding
with another drafter plugged into the loaded generator."""
import collections
import os

import torch

from fairseq_plugins import inference
from fairseq_plugins.api import Translator
from fairseq_plugins.decoding import DECODERS

RUNS = os.environ.get("RUNS", "../runs")


def load(**options) -> Translator:
    """The demo verifier, en->de, ``--max-len-a 1.2 --max-len-b 10``, with the demo drafter (or ``drafter``) for the
    decoders that need one (the registry's ``needs_drafter``; the others refuse a drafter);
    ``options``: ``Translator.load``'s (decoding, draft_length, drafter, ...; default decoding specdec)."""
    options = {"decoding": "specdec", "max_len_a": 1.2, "max_len_b": 10, **options}
    drafter = options.pop("drafter", "checkpoints/demo/drafter.pt")
    entry = DECODERS.get(options["decoding"])
    if entry is not None and entry.needs_drafter:
        options["drafter"] = drafter
    return Translator.load("checkpoints/demo/verifier.pt", RUNS + "/multi30k/bin", source_lang="en", target_lang="de",
                           **options)


def raw_sentences(count: int, split: str = "test"):
    """The first ``count`` English sentences of a raw Multi30k split (``$RUNS/m30raw``; test = test2016)."""
    with open(f"{RUNS}/m30raw/{split}.en") as f:
        return [line.strip() for _, line in zip(range(count), f)]


def samples(translator: Translator, count: int, split: str = "valid"):
    """The first ``count`` sentences of ``split`` as batch-1 fairseq samples (``net_input`` only)."""
    out = []
    for line in open(f"{RUNS}/multi30k/spm/{split}.en").read().splitlines()[:count]:
        src = inference.encode(translator.task.source_dictionary, line).unsqueeze(0)
        out.append({"net_input": {"src_tokens": src, "src_lengths": torch.tensor([src.numel()])}})
    return out


def decode_with(translator: Translator, sources, drafter):
    """Translate ``sources`` (raw text; the translator needs its sentencepiece model) with ``drafter`` in the
    translator's generator, counting afresh: (translations, tokens per iteration, {block position j: (iterations that
    reached it, share of them whose draft j passed)}).  The drafter stays plugged in."""
    generator = translator.generator
    generator.drafter, generator.stats = drafter, type(generator.stats)()
    reached, passed = collections.Counter(), collections.Counter()
    assemble = generator._assemble

    def counting_assemble(state, drafts, n_accepted, *rest):
        for j in range(min(int(n_accepted[0]) + 1, drafts.size(1))):
            reached[j] += 1
            passed[j] += int(n_accepted[0]) > j
        return assemble(state, drafts, n_accepted, *rest)

    generator._assemble = counting_assemble
    try:
        lines = translator.translate(sources)
    finally:
        generator._assemble = assemble
    rate = {j: (reached[j], passed[j] / reached[j]) for j in sorted(reached)}
    return lines, generator.stats.summary()["mean_accepted_per_iteration"], rate
