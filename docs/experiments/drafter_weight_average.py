"""Does averaging drafter weights help its drafts survive?  (issue 12: the drafter overfits its 29,000 sources)

Scores drafter checkpoints of one verifier, and uniform averages of their weights, by ``simulate_specdec``
(lossless SpecDec's tokens per iteration at k = 10 against the verifier's greedy translations of the valid
set: a count, not a timing).  An average of nearby checkpoints of one run is what fairseq's
``average_checkpoints`` / an EMA of the weights would ship.

    RUNS=... [DATA=bin] python docs/experiments/drafter_weight_average.py NAME=CKPT[,CKPT...] ... [--out OUT.json]

Each argument names one candidate: a checkpoint, or several joined by commas (their uniform average).  A checkpoint of
another shape than the demo drafter (e.g. ``drafter_layers.py cut``'s) is scored as its own model.
DATA: the binarized greedy distillation (default $RUNS/multi30k/distilled/bin); VERIFIER: the verifier whose greedy
translations DATA holds (default the demo verifier; the drafter must share its encoder); TEMPLATE: a drafter that fits VERIFIER, loaded first
as the model the candidates' weights are put into (default the demo drafter).
"""
import json
import os
import sys

import torch

torch.set_num_threads(1)
from fairseq.tasks.translation import load_langpair_dataset

from fairseq_plugins.api import Translator
from fairseq_plugins.criterions.glancing_block_loss import simulate_specdec
from fairseq_plugins.scripts.average_checkpoints import average_checkpoints

RUNS = os.environ.get("RUNS", "../runs")
DATA = os.environ.get("DATA", f"{RUNS}/multi30k/distilled/bin")
VERIFIER = os.environ.get("VERIFIER", "checkpoints/demo/verifier.pt")
TEMPLATE = os.environ.get("TEMPLATE", "checkpoints/demo/drafter.pt")  # a drafter of VERIFIER: the shape candidates load into


def tokens_per_iteration(task, model):
    """Lossless SpecDec's tokens per iteration of ``model`` over the valid split."""
    dataset = load_langpair_dataset(DATA, "valid", "en", task.source_dictionary, "de", task.target_dictionary,
                                    combine=False, dataset_impl=None, upsample_primary=1, left_pad_source=True,
                                    left_pad_target=False, max_source_positions=1000, max_target_positions=1000)
    batches = task.get_batch_iterator(dataset, max_tokens=4096, seed=1, max_positions=(1000, 1000))
    tokens = iterations = 0
    with torch.no_grad():
        for sample in batches.next_epoch_itr(shuffle=False):
            src = sample["net_input"]
            n, i = simulate_specdec(model, src["src_tokens"], src["src_lengths"], sample["target"],
                                    task.target_dictionary.pad(), task.target_dictionary.eos())
            tokens, iterations = tokens + n, iterations + i
    return tokens / iterations


def load_pair(drafter_path: str):
    """(task, drafter model in eval mode) of VERIFIER with the drafter at ``drafter_path``."""
    translator = Translator.load(VERIFIER, DATA, drafter=drafter_path,
                                 decoding="specdec", source_lang="en", target_lang="de")
    return translator.task, translator.generator.drafter.model.eval()


def candidate_drafter(paths, demo_drafter):
    """The demo drafter holding the uniform average of ``paths``' weights; a single checkpoint of another shape
    (e.g. fewer decoder layers) is loaded as its own model instead."""
    current = demo_drafter.state_dict()
    averaged = average_checkpoints(paths)["model"]  # in the first checkpoint's dtype
    if averaged.keys() != current.keys() or any(v.shape != current[k].shape for k, v in averaged.items()):
        if len(paths) > 1:
            raise SystemExit(f"{paths}: checkpoints of another shape than the demo drafter are scored one at a time")
        return load_pair(paths[0])[1]
    demo_drafter.load_state_dict({k: v.to(current[k].dtype) for k, v in averaged.items()})
    return demo_drafter


def main(argv):
    out_path = argv[argv.index("--out") + 1] if "--out" in argv else None
    candidates = [a for a in argv if "=" in a]
    task, drafter = load_pair(TEMPLATE)
    results = {}
    for candidate in candidates:
        name, paths = candidate.split("=", 1)
        results[name] = tokens_per_iteration(task, candidate_drafter(paths.split(","), drafter))
        print(f"{name}: {results[name]:.3f} tokens per iteration", flush=True)
    if out_path:
        json.dump(results, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
