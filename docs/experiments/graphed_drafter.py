"""Checks ``--cuda-graphs`` (``fairseq_plugins/decoding/cuda_graphs.py``) on the demo pair against the ordinary caches.

Until 2026-11-28 this file held the static steps themselves as an experiment (decoders ``specdec-graph`` and
``specdec-graph-all``); their first GPU run (``gpu_session8.sh``: specdec 2.51x -> 5.39x stock greedy on an H200, the
same output) made them the product's ``--cuda-graphs`` (``specdec-graph-all`` is ``specdec --cuda-graphs on``). What
stays here is the check: the first SENTENCES test2016 sentences decoded by ``specdec`` with ``--cuda-graphs off``
and ``on``, with a drafter that runs the ordinary drafter cache beside the static step on every call and counts
the drafts that differ. On a CPU the static steps run eagerly; on CUDA they replay their graphs.

    RUNS=... python docs/experiments/graphed_drafter.py [SENTENCES] [DEVICE] [DRAFT_LENGTH]
"""
import os
import sys

import torch

from fairseq_plugins.decoding.cuda_graphs import GraphedBlockDrafter
from fairseq_plugins.decoding.fast_decoder import float_linear
from fairseq_plugins.decoding.specdec import BlockDrafter


class CheckingDrafter(GraphedBlockDrafter):
    """The graphed drafter with an ordinary cached drafter (``F.linear``) run beside it on the same calls: counts
    the proposals whose drafts differ and the largest logit difference."""

    def __init__(self, graphed: GraphedBlockDrafter):
        ordinary = graphed.ordinary
        super().__init__(ordinary, graphed.static.m - 1)
        self.reference = BlockDrafter(ordinary.model, vocab_limit=ordinary.vocab_limit, linear=float_linear)
        self.proposals = self.differing = 0
        self.largest = 0.0

    def start(self, batch):
        super().start(batch)
        self.reference.start(batch)

    def propose(self, tokens, lengths, k):
        draft = super().propose(tokens, lengths, k)
        expected = self.reference.propose(tokens, lengths, k)
        self.proposals += 1
        self.differing += int(not torch.equal(draft.tokens, expected.tokens))
        finite = torch.isfinite(expected.scores)
        self.largest = max(self.largest, float((draft.scores - expected.scores)[finite].abs().max()))
        return draft

    def keep_rows(self, rows):
        super().keep_rows(rows)
        self.reference.keep_rows(rows)


def main(argv):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import demo_pair

    count = int(argv[0]) if argv else 100
    device = argv[1] if len(argv) > 1 else "cpu"
    draft_length = argv[2] if len(argv) > 2 else "fixed"  # measured: catch-ups after undrafted iterations too
    sentences = demo_pair.raw_sentences(count)
    outputs = {}
    for graphs in ("off", "on"):
        translator = demo_pair.load(device=device, draft_length=draft_length, cuda_graphs=graphs,
                                    sentencepiece_model="checkpoints/demo/sentencepiece.model")
        if graphs == "on":
            checking = translator.generator.drafter = CheckingDrafter(translator.generator.drafter)
        outputs[graphs] = translator.translate(sentences)
    same = sum(a == b for a, b in zip(outputs["off"], outputs["on"]))
    print(f"{count} sentences on {device}, --draft-length {draft_length}: outputs of --cuda-graphs on equal to "
          f"off's {same}/{count}; proposals {checking.proposals} ({checking.static_proposals} by the static step), "
          f"drafts differing {checking.differing}, largest logit difference {checking.largest:.2e}")
    return 0 if same == count and checking.differing == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
