"""``python -m fairseq_plugins.scripts.export_checkpoint IN OUT [--fp16] [--drop-sequential-head]``: a small
inference-only copy of a fairseq checkpoint (model weights and config; no optimizer or training state, no paths of the
machine that trained it)."""
import argparse
import os

import torch

from fairseq_plugins.scripts import output_file, save_atomically
from fairseq_plugins_compat.checkpoint_loading import load_checkpoint_file
from fairseq_plugins_compat.errors import PluginError, exit_on_plugin_error

HEAD_PREFIX = "decoder.sequential_head."


def export(path_in, path_out, fp16=False, drop_sequential_head=False):
    state = load_checkpoint_file(path_in)
    if drop_sequential_head:
        without_sequential_head(state, path_in)
    converted = []  # equal tensors (tied embeddings) are stored once
    model = {}
    for name, tensor in state["model"].items():
        same = next((c for t, c in converted if t.shape == tensor.shape and t.dtype == tensor.dtype
                     and torch.equal(t, tensor)), None)
        if same is None:
            same = tensor.half() if fp16 and tensor.is_floating_point() else tensor
            converted.append((tensor, same))
        model[name] = same
    save_atomically(inference_checkpoint(state, model), path_out)
    return sum(c.numel() for _, c in converted)


def inference_checkpoint(state, model):
    """What fairseq loads as a checkpoint, and fine-tunes from (``--finetune-from-model``): ``state``'s configs
    without the machine's paths (changed in place) and the weights ``model``; no optimizer or training state."""
    for config in (state.get("cfg"), state.get("args")):
        without_machine_paths(config)
    return {"cfg": state.get("cfg"), "args": state.get("args"), "model": model,
            "optimizer_history": [{"criterion_name": "CrossEntropyCriterion", "optimizer_name": "none",
                                   "lr_scheduler_state": {}, "num_updates": 0}],
            "extra_state": {}}


def is_machine_path(value) -> bool:
    return isinstance(value, str) and (os.path.isabs(value) or value.startswith("~"))


def without_machine_paths(config):
    """Blanks, in place, every absolute path in a saved config (dicts, Namespaces and lists, nested): the data and
    save folders, log folders, a sentencepiece model, a drafter's initial verifier... name files of the machine that
    trained the model.  A user dir keeps its folder's name, which the loader maps to the installed plugin."""
    members = vars(config) if isinstance(config, argparse.Namespace) else config
    if isinstance(members, dict):
        keys = list(members)
    elif isinstance(members, list):
        keys = range(len(members))
    else:
        return
    for key in keys:
        value = members[key]
        if is_machine_path(value):
            members[key] = os.path.basename(os.path.normpath(value)) if key == "user_dir" else ""
        else:
            without_machine_paths(value)


def without_sequential_head(state, path):
    """Removes a block drafter's sequential head (its weights and the config flag that builds it) from ``state``."""
    head = [name for name in state["model"] if name.startswith(HEAD_PREFIX)]
    if not head:
        raise PluginError(f"{path} has no sequential head to drop")
    for name in head:
        del state["model"][name]
    for config in (state.get("args"), (state.get("cfg") or {}).get("model")):
        if config is not None:
            config.sequential_head = False


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m fairseq_plugins.scripts.export_checkpoint",
                                     description=__doc__.split(": ", 1)[1])
    parser.add_argument("input", help="fairseq checkpoint")
    parser.add_argument("output", help="where to write the inference-only copy")
    parser.add_argument("--fp16", action="store_true", help="store floating-point weights in half precision "
                                                            "(they are cast back to the model's dtype when loaded)")
    parser.add_argument("--drop-sequential-head", action="store_true",
                        help="leave out a block drafter's sequential head: the block alone, e.g. to fine-tune it on "
                             "other targets with fairseq-train --finetune-from-model, which needs a checkpoint whose "
                             "weights match the model it builds")
    args = parser.parse_args(argv)
    n = export(args.input, output_file(args.output), args.fp16, args.drop_sequential_head)
    print(f"wrote {args.output} ({n / 1e6:.1f}M parameters)")


def cli_main():
    exit_on_plugin_error(main, "export_checkpoint")


if __name__ == "__main__":
    cli_main()
