"""``python -m fairseq_plugins.scripts.copy_layers IN OUT --encoder-layers N --decoder-layers M``: the warm start
of a transformer with other numbers of layers, each layer a copy of one of IN's (e.g. a deep-encoder,
shallow-decoder 12+2 model from a trained 6+6), for ``fairseq-train --finetune-from-model OUT``."""
import argparse
import re
from typing import Dict, List, Optional

import torch

from fairseq_plugins.scripts import output_file, save_atomically
from fairseq_plugins.scripts.export_checkpoint import inference_checkpoint
from fairseq_plugins_compat.checkpoint_loading import load_checkpoint_file
from fairseq_plugins_compat.errors import PluginError, exit_on_plugin_error

LAYER = re.compile(r"^(encoder|decoder)\.layers\.(\d+)\.(.*)$")


def layer_count(model: Dict[str, torch.Tensor], stack: str) -> int:
    return len({int(m.group(2)) for m in map(LAYER.match, model) if m and m.group(1) == stack})


def default_sources(stack: str, new: int, old: int) -> List[int]:
    """Which old layer each new one copies: the encoder stacks the old layers again on top of themselves (0..old-1,
    0..old-1, ...; progressive stacking); a shallower decoder keeps its first layers and its last one."""
    if stack == "encoder" or new >= old:
        return [i % old for i in range(new)]
    return list(range(new - 1)) + [old - 1]


def copy_layers(model: Dict[str, torch.Tensor], sources: Dict[str, List[int]]) -> Dict[str, torch.Tensor]:
    """``model`` (a state dict) with ``encoder.layers.i.*`` taken from ``encoder.layers.{sources['encoder'][i]}.*``
    (the decoder likewise); every other weight (embeddings, output projection, layer norms of the stacks) as it
    is. Copies are new tensors, so training the model updates each layer on its own."""
    copied = {name: tensor for name, tensor in model.items() if not LAYER.match(name)}
    for stack, layers in sources.items():
        for new, old in enumerate(layers):
            prefix = f"{stack}.layers.{old}."
            for name, tensor in model.items():
                if name.startswith(prefix):
                    copied[f"{stack}.layers.{new}.{name[len(prefix):]}"] = tensor.clone()
    return copied


def set_layers(config, encoder: int, decoder: int):
    """The saved config (a Namespace or dict), in place, naming the new numbers of layers."""
    if config is None:
        return
    members = vars(config) if isinstance(config, argparse.Namespace) else config
    members["encoder_layers"], members["decoder_layers"] = encoder, decoder


def parse_sources(text: Optional[str], stack: str, new: int, old: int) -> List[int]:
    if text is None:
        return default_sources(stack, new, old)
    try:
        layers = [int(part) for part in text.split(",")]
    except ValueError:
        raise PluginError(f"--{stack}-from must be comma-separated layer numbers, got {text!r}") from None
    if len(layers) != new or not all(0 <= layer < old for layer in layers):
        raise PluginError(f"--{stack}-from needs {new} layer numbers (one per new layer) between 0 and {old - 1}, "
                          f"got {text!r}")
    return layers


def run(path_in: str, path_out: str, encoder: int, decoder: int, encoder_from: Optional[str] = None,
        decoder_from: Optional[str] = None) -> Dict[str, List[int]]:
    state = load_checkpoint_file(path_in)
    model = state["model"]
    old = {stack: layer_count(model, stack) for stack in ("encoder", "decoder")}
    if not old["encoder"] or not old["decoder"]:
        raise PluginError(f"{path_in} is not an encoder-decoder transformer (no encoder.layers.* and "
                          f"decoder.layers.* weights)")
    sources = {"encoder": parse_sources(encoder_from, "encoder", encoder, old["encoder"]),
               "decoder": parse_sources(decoder_from, "decoder", decoder, old["decoder"])}
    set_layers((state.get("cfg") or {}).get("model"), encoder, decoder)
    set_layers(state.get("args"), encoder, decoder)
    save_atomically(inference_checkpoint(state, copy_layers(model, sources)), path_out)
    return sources


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m fairseq_plugins.scripts.copy_layers",
                                     description=__doc__.split(": ", 1)[1])
    parser.add_argument("input", help="a trained fairseq transformer checkpoint")
    parser.add_argument("output", help="the warm start to write (weights and config; no optimizer state)")
    parser.add_argument("--encoder-layers", type=int, required=True, help="encoder layers of the new model")
    parser.add_argument("--decoder-layers", type=int, required=True, help="decoder layers of the new model")
    parser.add_argument("--encoder-from", help="the old layer each new encoder layer copies, comma-separated "
                                               "(default: the old layers stacked again on top: 0,1,..,0,1,..)")
    parser.add_argument("--decoder-from", help="the same for the decoder (default, when it is shallower: its first "
                                               "layers and its last one, e.g. 0,5 for 2 of 6)")
    args = parser.parse_args(argv)
    if args.encoder_layers < 1 or args.decoder_layers < 1:
        raise PluginError("--encoder-layers and --decoder-layers must be at least 1")
    sources = run(args.input, output_file(args.output), args.encoder_layers, args.decoder_layers,
                  args.encoder_from, args.decoder_from)
    print(f"wrote {args.output}: encoder layers from {sources['encoder']}, decoder layers from {sources['decoder']}")


def cli_main():
    exit_on_plugin_error(main, "copy_layers")


if __name__ == "__main__":
    cli_main()
