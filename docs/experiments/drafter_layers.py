"""Reshape a drafter checkpoint's decoder, as the start of a fine-tune (``--finetune-from-model OUT`` with the matching
``--decoder-layers`` / ``--decoder-ffn-embed-dim``):

    python docs/experiments/drafter_layers.py cut IN OUT LAYER   # keep decoder layer LAYER (0-based) alone
    python docs/experiments/drafter_layers.py widen IN OUT       # every decoder feed-forward layer twice as wide
    python docs/experiments/drafter_layers.py grow IN OUT VERIFIER [WEIGHTS]  # one decoder layer more, on top

``widen`` is function-preserving (Net2Net): the hidden units are duplicated (the copies' input weights nudged by
noise of scale 1e-3 so that they can part) and the output weights halved.  ``grow`` puts a copy of VERIFIER's decoder
layer of the next index on top (a 2-layer drafter gets the verifier's third), not function-preserving; WEIGHTS: a
state dict of that shape to put in instead (``feature_drafter.py``'s ``grown`` arm with ``GATE_INIT=1``, saved by
its ``SAVE_PREFIX``), cast to the checkpoint's dtype.  The optimizer state is dropped.
Score the result with ``drafter_weight_average.py NAME=OUT``.
"""
import sys

import torch


def set_model_option(checkpoint, name, value):
    """``name`` = ``value`` in the checkpoint's args and cfg.model, where present."""
    if checkpoint.get("args") is not None:
        setattr(checkpoint["args"], name, value)
    model_cfg = (checkpoint.get("cfg") or {}).get("model")
    if isinstance(model_cfg, dict):
        model_cfg[name] = value
    elif model_cfg is not None:
        setattr(model_cfg, name, value)


def cut(checkpoint, keep: int):
    """Keep decoder layer ``keep`` alone, as layer 0."""
    prefix = f"decoder.layers.{keep}."
    model = {}
    for key, value in checkpoint["model"].items():
        if key.startswith("decoder.layers."):
            if not key.startswith(prefix):
                continue
            key = "decoder.layers.0." + key[len(prefix):]
        model[key] = value
    checkpoint["model"] = model
    set_model_option(checkpoint, "decoder_layers", 1)


def widen(checkpoint):
    """Every decoder feed-forward layer twice as wide, computing the same function (up to the noise)."""
    model, noise = checkpoint["model"], torch.Generator().manual_seed(0)
    width = None
    for key in [k for k in model if k.startswith("decoder.layers.") and k.endswith("fc1.weight")]:
        layer = key[: -len("fc1.weight")]
        fc1, fc2 = model[layer + "fc1.weight"], model[layer + "fc2.weight"]
        nudge = (torch.randn(fc1.shape, generator=noise) * 1e-3).to(fc1.dtype)
        model[layer + "fc1.weight"] = torch.cat([fc1, fc1 + nudge], 0)
        model[layer + "fc1.bias"] = torch.cat([model[layer + "fc1.bias"]] * 2, 0)
        model[layer + "fc2.weight"] = torch.cat([fc2 / 2, fc2 / 2], 1)
        width = 2 * fc1.size(0)
    set_model_option(checkpoint, "decoder_ffn_embed_dim", width)
    checkpoint.pop("last_optimizer_state", None)


def grow(checkpoint, verifier, weights=None):
    """One decoder layer more on top: the verifier's decoder layer of that index (or ``weights``, a whole state dict)."""
    model = checkpoint["model"]
    layers = 1 + max(int(key.split(".")[2]) for key in model if key.startswith("decoder.layers."))
    prefix = f"decoder.layers.{layers}."
    added = {key: value for key, value in verifier["model"].items() if key.startswith(prefix)}
    if not added:
        raise SystemExit(f"the verifier has no decoder layer {layers} to copy")
    dtype = next(iter(model.values())).dtype
    model.update({key: value.to(dtype) for key, value in added.items()})
    if weights is not None:
        if weights.keys() != model.keys():
            raise SystemExit(f"the weights' keys differ from a {layers + 1}-layer drafter's: "
                             f"{sorted(weights.keys() ^ model.keys())[:4]}")
        model.update({key: value.to(model[key].dtype) for key, value in weights.items()})
    set_model_option(checkpoint, "decoder_layers", layers + 1)
    checkpoint.pop("last_optimizer_state", None)


def main(argv):
    action, source, target = argv[:3]
    checkpoint = torch.load(source, map_location="cpu", weights_only=False)
    if action == "cut":
        cut(checkpoint, int(argv[3]))
    elif action == "widen":
        widen(checkpoint)
    elif action == "grow":
        verifier = torch.load(argv[3], map_location="cpu", weights_only=False)
        weights = torch.load(argv[4], map_location="cpu") if len(argv) > 4 else None
        grow(checkpoint, verifier, weights)
    else:
        raise SystemExit(f"unknown action {action!r}: cut, widen or grow")
    torch.save(checkpoint, target)


if __name__ == "__main__":
    main(sys.argv[1:])
