"""``fairseq-average-checkpoints``: average the weights of several fairseq checkpoints.

The PyPI fairseq lacks ``scripts/average_checkpoints.py``; this is the same command line
(``--inputs``, ``--num-epoch-checkpoints`` / ``--num-update-checkpoints``, ``--output``),
loading every file with the safe allowlisted loader.
"""
import argparse
import collections
import os
import re

import torch

from fairseq_plugins.scripts import output_file, save_atomically
from fairseq_plugins_compat.checkpoint_loading import CheckpointError, load_checkpoint_file
from fairseq_plugins_compat.errors import exit_on_plugin_error


def average_checkpoints(paths):
    """Return the first checkpoint's state with ``model`` replaced by the mean of all.

    Float tensors are averaged in float64 and cast back; integer buffers must agree.  A tensor that
    is the same in every checkpoint (a frozen encoder) comes back bit for bit, -0.0 included: the
    drafter's encoder fingerprint (``models.drafter_init``) still matches.
    """
    if not paths:
        raise CheckpointError("no checkpoints to average")
    new_state, sums = None, collections.OrderedDict()
    for path in paths:
        state = load_checkpoint_file(path)
        if new_state is None:
            new_state = state
        model = state["model"]
        if sums and set(model) != set(sums):
            raise CheckpointError(f"{path}: parameters differ from {paths[0]}'s; cannot average")
        for name, tensor in model.items():
            if tensor.is_floating_point():
                sums[name] = sums[name] + tensor.double() if name in sums else tensor.double()  # not 0 + x: -0.0
            elif name in sums and not torch.equal(sums[name], tensor):
                raise CheckpointError(f"{path}: integer buffer {name} differs; cannot average")
            else:
                sums[name] = tensor
    averaged = {}  # by storage in the first checkpoint: tied weights stay tied
    for name, total in sums.items():
        first = new_state["model"][name]
        if first.data_ptr() not in averaged:
            averaged[first.data_ptr()] = (total / len(paths)).to(first.dtype) if first.is_floating_point() else total
    new_state["model"] = collections.OrderedDict(
        (name, averaged[tensor.data_ptr()]) for name, tensor in new_state["model"].items()
    )
    return new_state


def last_n_checkpoints(directory, n, by_update, upper_bound=None):
    """Paths of the ``n`` newest ``checkpointE.pt`` (or ``checkpoint_E_U.pt``) in ``directory``."""
    pattern = re.compile(r"checkpoint_\d+_(\d+)\.pt$" if by_update else r"checkpoint(\d+)\.pt$")
    found = sorted(
        ((int(m.group(1)), name) for name in os.listdir(directory) if (m := pattern.match(name))),
        reverse=True,
    )
    found = [(step, name) for step, name in found if upper_bound is None or step <= upper_bound]
    if len(found) < n:
        raise CheckpointError(f"{directory}: found {len(found)} checkpoints, need {n}")
    return [os.path.join(directory, name) for _, name in found[:n]]


def get_parser():
    parser = argparse.ArgumentParser(prog="fairseq-average-checkpoints", description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", required=True, nargs="+", help="checkpoint files, or one directory with --num-*-checkpoints")
    parser.add_argument("--output", required=True, help="where to write the averaged checkpoint")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--num-epoch-checkpoints", type=int, help="average the last N checkpointE.pt in the directory")
    group.add_argument("--num-update-checkpoints", type=int, help="average the last N checkpoint_E_U.pt in the directory")
    parser.add_argument("--checkpoint-upper-bound", type=int, help="ignore checkpoints after this epoch/update")
    return parser


def main(args):
    count = args.num_epoch_checkpoints or args.num_update_checkpoints
    if count:
        if len(args.inputs) != 1 or not os.path.isdir(args.inputs[0]):
            raise CheckpointError("--num-*-checkpoints needs exactly one directory in --inputs")
        paths = last_n_checkpoints(args.inputs[0], count, bool(args.num_update_checkpoints), args.checkpoint_upper_bound)
    else:
        paths = args.inputs
    output_file(args.output)
    print("averaging:", *paths, sep="\n  ")
    save_atomically(average_checkpoints(paths), args.output)
    print(f"wrote {args.output}")


def cli_main():
    exit_on_plugin_error(lambda: main(get_parser().parse_args()), "fairseq-average-checkpoints")


if __name__ == "__main__":
    cli_main()
