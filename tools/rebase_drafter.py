"""Carry a trained drafter over to a verifier whose encoder has changed (a verifier trained further, whole).

A shared-encoder drafter holds a copy of its verifier's encoder and that encoder's fingerprint, and decoding refuses
any other verifier.  When the verifier is trained further, its encoder changes, and so does what the drafter's
decoder reads.  This writes a checkpoint to start the drafter's fine-tune from (``recipes/train-drafter.sh
--finetune-from-model OUT`` with ``VERIFIER`` = the new verifier): the drafter's decoder as trained, the new
verifier's encoder weights, and the new fingerprint.  Its decoder still expects the old encoder's output, so it is a
starting point for that fine-tune, not a drafter to decode with.

    python tools/rebase_drafter.py DRAFTER VERIFIER OUT
"""
import sys

import torch

import fairseq_plugins  # noqa: F401  (the compat shims)
from fairseq_plugins.models.drafter_init import weights_fingerprint
from fairseq_plugins.scripts import save_atomically


def encoder_weights(model_state):
    """{name without ``encoder.``: tensor} of a fairseq model's state dict."""
    return {name[len("encoder."):]: tensor for name, tensor in model_state.items() if name.startswith("encoder.")}


def set_model_option(state, name, value):
    """Write a model option into both places fairseq reads it from (``cfg.model`` and legacy ``args``)."""
    for holder in (state.get("cfg", {}).get("model"), state.get("args")):
        if isinstance(holder, dict):
            holder[name] = value
        elif holder is not None:
            setattr(holder, name, value)


def main(drafter_path: str, verifier_path: str, out: str):
    drafter = torch.load(drafter_path, map_location="cpu", weights_only=False)
    verifier = torch.load(verifier_path, map_location="cpu", weights_only=False)
    new_encoder = encoder_weights(verifier["model"])
    old_names = set(encoder_weights(drafter["model"]))
    if old_names != set(new_encoder):
        differing = sorted(old_names ^ set(new_encoder))[:5]
        sys.exit(f"{verifier_path}: its encoder's weights are not named as the drafter's: {differing}")
    for name, tensor in new_encoder.items():
        drafter["model"]["encoder." + name] = tensor.to(drafter["model"]["encoder." + name].dtype).clone()
    fingerprint = weights_fingerprint(new_encoder)
    set_model_option(drafter, "verifier_encoder_fingerprint", fingerprint)
    set_model_option(drafter, "init_from_verifier", verifier_path)
    save_atomically(drafter, out)
    print(f"{out}: {drafter_path}'s decoder on {verifier_path}'s encoder (fingerprint {fingerprint})")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
