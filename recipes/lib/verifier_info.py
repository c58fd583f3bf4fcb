"""What the recipes need to know about a trained fairseq verifier, printed as shell assignments.

    eval "$(python recipes/lib/verifier_info.py CHECKPOINT --src-dict D/dict.en.txt --tgt-dict D/dict.de.txt)"

sets VERIFIER_EMBED_DIM, VERIFIER_FFN_DIM, VERIFIER_HEADS, VERIFIER_ENC_LAYERS, VERIFIER_DEC_LAYERS,
VERIFIER_SHARE (all | decoder | none), VERIFIER_SRC / VERIFIER_TGT (the languages of its task, empty
when it infers them from the data), VERIFIER_MPARAMS (millions of parameters), VERIFIER_ARCH and
VERIFIER_MAX_SOURCE / VERIFIER_MAX_TARGET (its positions; fairseq's default 1024 where none are saved).
Sizes come from the weights, so they hold whatever the saved configuration omits.  Stops with one
line when the file is no fairseq checkpoint or a dictionary does not fit its embeddings (a
dictionary other than the one it was trained with).
"""
import argparse
import re
import shlex
import sys

from fairseq_plugins_compat.checkpoint_loading import load_checkpoint_file
from fairseq_plugins_compat.errors import PluginError


DEFAULT_POSITIONS = 1024  # fairseq's transformer default (DEFAULT_MAX_SOURCE_POSITIONS / _TARGET_)


def saved_options(state, section):
    """``cfg[section]`` of a fairseq checkpoint as a dict (legacy checkpoints: ``args``)."""
    cfg = state.get("cfg")
    options = cfg.get(section) if cfg is not None else None
    if options is None:
        options = state.get("args")
    if options is None:
        return {}
    return dict(vars(options) if isinstance(options, argparse.Namespace) else options)


def layer_count(weights, prefix):
    """Number of ``{prefix}.layers.N.`` blocks in the weights."""
    found = {int(m.group(1)) for name in weights for m in [re.match(rf"{prefix}\.layers\.(\d+)\.", name)] if m}
    return len(found)


def embedding_rows(weights, path, side):
    tensor = weights.get(f"{side}.embed_tokens.weight")
    if tensor is None:
        raise PluginError(f"{path}: no {side}.embed_tokens.weight: not a fairseq encoder-decoder transformer")
    return tensor.shape


def share_mode(model):
    if model.get("share_all_embeddings"):
        return "all"
    return "decoder" if model.get("share_decoder_input_output_embed") else "none"


def facts(path):
    """``{name: value}`` of the verifier at ``path``."""
    state = load_checkpoint_file(path)
    weights, model, task = state["model"], saved_options(state, "model"), saved_options(state, "task")
    src_rows, embed_dim = embedding_rows(weights, path, "encoder")
    tgt_rows, _ = embedding_rows(weights, path, "decoder")
    ffn = weights.get("decoder.layers.0.fc1.weight")
    return {
        "ARCH": model.get("arch") or model.get("_name") or "",
        "EMBED_DIM": embed_dim,
        "FFN_DIM": ffn.shape[0] if ffn is not None else model.get("decoder_ffn_embed_dim", ""),
        "HEADS": model.get("decoder_attention_heads") or model.get("encoder_attention_heads") or "",
        "ENC_LAYERS": layer_count(weights, "encoder"),
        "DEC_LAYERS": layer_count(weights, "decoder"),
        "SHARE": share_mode(model),
        "SRC": task.get("source_lang") or "",
        "TGT": task.get("target_lang") or "",
        "SRC_ROWS": src_rows,
        "TGT_ROWS": tgt_rows,
        "MPARAMS": round(parameter_count(weights) / 1e6, 2),
        "MAX_SOURCE": model.get("max_source_positions") or DEFAULT_POSITIONS,
        "MAX_TARGET": model.get("max_target_positions") or DEFAULT_POSITIONS,
    }


def parameter_count(weights):
    """Parameters of the saved weights, a tied (shared) tensor counted once."""
    unique = {(t.data_ptr(), tuple(t.shape)): t.numel() for t in weights.values() if hasattr(t, "numel")}
    return sum(unique.values())


def check_dictionary(dict_path, rows, side, verifier_path):
    """fairseq's Dictionary adds its 4 specials to the file's entries; the embedding has one row each."""
    from fairseq.data import Dictionary

    try:
        size = len(Dictionary.load(dict_path))
    except (OSError, ValueError, RuntimeError) as error:
        raise PluginError(f"{dict_path}: not a fairseq dictionary ({error})") from None
    if size != rows:
        raise PluginError(f"{dict_path} has {size} symbols but the verifier {verifier_path} has {rows} {side} "
                          "embeddings: give the dictionaries it was trained with")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint")
    parser.add_argument("--src-dict", help="check that this dictionary fits the source embeddings")
    parser.add_argument("--tgt-dict", help="check that this dictionary fits the target embeddings")
    args = parser.parse_args(argv)
    try:
        found = facts(args.checkpoint)
        if args.src_dict:
            check_dictionary(args.src_dict, found["SRC_ROWS"], "source", args.checkpoint)
        if args.tgt_dict:
            check_dictionary(args.tgt_dict, found["TGT_ROWS"], "target", args.checkpoint)
    except PluginError as error:
        sys.exit(str(error))
    for name, value in found.items():
        print(f"VERIFIER_{name}={shlex.quote(str(value))}")


if __name__ == "__main__":
    main()
