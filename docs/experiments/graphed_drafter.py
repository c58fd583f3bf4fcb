"""Checks ``--cuda-graphs`` (``fairseq_plugins/decoding/cuda_graphs.py``) on the demo pair against the ordinary caches.

Until 2026-11-28 this file held the static steps themselves as an experiment (decoders ``specdec-graph`` and
``specdec-graph-all``); their first GPU run (``gpu_session8.sh``: specdec 2.51x -> 5.39x stock greedy on an H200, the
same output) made them the product's ``--cuda-graphs`` (``specdec-graph-all`` is ``specdec --cuda-graphs on``). What
stays here is the check: the first SENTENCES test2016 sentences decoded by ``specdec`` with ``--cuda-graphs off``
and ``on``, with the parity test's drafter that runs the ordinary drafter cache beside the static step on every
call and counts the calls whose drafts or scores differ (``tests/test_cuda_graphs.py``). On a CPU the static steps
run eagerly; on CUDA they replay their graphs.

    RUNS=... python docs/experiments/graphed_drafter.py [SENTENCES] [DEVICE] [DRAFT_LENGTH]
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv):
    sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "tests")]
    import demo_pair
    from test_cuda_graphs import ComparingDrafter  # the graphed drafter beside the ordinary one, call by call

    count = int(argv[0]) if argv else 100
    device = argv[1] if len(argv) > 1 else "cpu"
    draft_length = argv[2] if len(argv) > 2 else "fixed"  # measured: catch-ups after undrafted iterations too
    sentences = demo_pair.raw_sentences(count)
    outputs = {}
    for graphs in ("off", "on"):
        translator = demo_pair.load(device=device, draft_length=draft_length, cuda_graphs=graphs,
                                    sentencepiece_model="checkpoints/demo/sentencepiece.model")
        if graphs == "on":
            graphed = translator.generator.drafter
            checking = translator.generator.drafter = ComparingDrafter(
                graphed.ordinary.model, graphed.static.m - 1, graphed.ordinary.vocab_limit)
        outputs[graphs] = translator.translate(sentences)
    same = sum(a == b for a, b in zip(outputs["off"], outputs["on"]))
    print(f"{count} sentences on {device}, --draft-length {draft_length}: outputs of --cuda-graphs on equal to "
          f"off's {same}/{count}; proposals {checking.proposals} ({checking.static_proposals} by the static step), "
          f"drafts or scores differing {len(checking.differing)}")
    return 0 if same == count and not checking.differing else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
