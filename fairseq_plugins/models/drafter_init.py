"""Initialise a drafter's encoder and embeddings from a trained verifier checkpoint.

Copying weights is only meaningful if the receiving encoder *computes the same function*:
the same position table kind and size (learned vs sinusoidal, max source positions), the
same embedding scale (``--no-scale-embedding``), the same layer layout (pre/post norm,
activation, layernorm_embedding) and sizes.  So the drafter first adopts every
encoder-defining option of the verifier (logging each change), then loads the verifier's
encoder weights strictly; ``tests/test_drafter_init.py`` checks that both encoders give
the same output.  The checkpoint is read only with the safe loader.
"""
import argparse
import logging

from fairseq_plugins_compat.checkpoint_loading import load_checkpoint_file
from fairseq_plugins_compat.errors import PluginError

logger = logging.getLogger(__name__)

# every option that changes what fairseq's TransformerEncoderBase computes
ENCODER_OPTIONS = (
    "encoder_embed_dim", "encoder_ffn_embed_dim", "encoder_layers", "encoder_attention_heads",
    "encoder_normalize_before", "encoder_learned_pos", "encoder_layers_to_keep", "activation_fn",
    "no_scale_embedding", "layernorm_embedding", "no_token_positional_embeddings",
    "max_source_positions", "adaptive_input", "quant_noise_pq", "quant_noise_pq_block_size",
)
# fairseq's transformer defaults, for verifier checkpoints that omit an option
TRANSFORMER_DEFAULTS = {
    "encoder_normalize_before": False, "encoder_learned_pos": False, "encoder_layers_to_keep": None,
    "activation_fn": "relu", "no_scale_embedding": False, "layernorm_embedding": False,
    "no_token_positional_embeddings": False, "adaptive_input": False, "quant_noise_pq": 0,
    "quant_noise_pq_block_size": 8,
}


def verifier_model_args(state):
    """The model options saved in a fairseq checkpoint (``cfg.model`` or legacy ``args``)."""
    cfg = state.get("cfg")
    model_args = cfg.get("model") if cfg is not None else None
    if model_args is None:
        model_args = state.get("args")
    if model_args is None:
        raise PluginError("verifier checkpoint has no model configuration (cfg.model or args)")
    if isinstance(model_args, argparse.Namespace):
        return vars(model_args)
    return dict(model_args)


def adopt_verifier_encoder(args):
    """If ``args.init_from_verifier`` is set and not yet applied: load that checkpoint,
    overwrite the drafter's encoder options with the verifier's and return the state
    (its ``model`` weights are copied by :func:`copy_verifier_weights` once built).

    Sets ``args.verifier_init_applied`` so that rebuilding the drafter from its own
    checkpoint (which stores these args) neither needs nor reloads the verifier file.
    """
    path = getattr(args, "init_from_verifier", None)
    if not path or getattr(args, "verifier_init_applied", False):
        return None
    state = load_checkpoint_file(path)
    verifier = verifier_model_args(state)
    for name in ENCODER_OPTIONS:
        value = verifier.get(name, TRANSFORMER_DEFAULTS.get(name))
        if value is None and name not in TRANSFORMER_DEFAULTS:
            raise PluginError(f"{path}: verifier configuration lacks {name}")
        if getattr(args, name, None) != value:
            logger.info("drafter %s: %r -> %r (taken from the verifier)", name, getattr(args, name, None), value)
            setattr(args, name, value)
    needed = verifier.get("max_target_positions") or 0
    if needed and args.max_target_positions < needed + args.block_size:  # draft after any verifier prefix
        logger.info("drafter max_target_positions: %d -> %d (verifier's + block size)",
                    args.max_target_positions, needed + args.block_size)
        args.max_target_positions = needed + args.block_size
    if args.share_all_embeddings and args.decoder_embed_dim != args.encoder_embed_dim:
        raise PluginError(
            f"--share-all-embeddings: the drafter's decoder dim {args.decoder_embed_dim} differs from the "
            f"verifier's embedding dim {args.encoder_embed_dim}; pick a drafter arch of the verifier's size"
        )
    args.verifier_init_applied = True
    return state


def _sub_state(model_state, prefix):
    return {name[len(prefix):]: tensor for name, tensor in model_state.items() if name.startswith(prefix)}


def copy_verifier_weights(model, state, args):
    """Copy the verifier's encoder (strictly) and target embeddings into ``model``."""
    path = args.init_from_verifier
    weights = state["model"]
    encoder_state = _sub_state(weights, "encoder.")
    expected = model.encoder.embed_tokens.weight.shape
    found = encoder_state.get("embed_tokens.weight")
    if found is None or found.shape != expected:
        raise PluginError(
            f"{path}: verifier source embeddings {tuple(found.shape) if found is not None else None} do not fit "
            f"the drafter's {tuple(expected)}: was the verifier trained with the same dictionary?"
        )
    try:
        model.encoder.load_state_dict(encoder_state, strict=True)
    except RuntimeError as error:
        raise PluginError(f"{path}: verifier encoder does not load into the drafter: {error}") from None
    if model.decoder.embed_tokens is not model.encoder.embed_tokens:
        _copy_tensor(model.decoder.embed_tokens.weight, weights, "decoder.embed_tokens.weight", path)
    if model.decoder.output_projection.weight is not model.decoder.embed_tokens.weight:
        if "decoder.output_projection.weight" in weights:
            _copy_tensor(model.decoder.output_projection.weight, weights, "decoder.output_projection.weight", path)
    logger.info("initialised the drafter's encoder and embeddings from %s", path)


def _copy_tensor(target, weights, name, path):
    source = weights.get(name)
    if source is None or source.shape != target.shape:
        raise PluginError(f"{path}: {name} {tuple(source.shape) if source is not None else None} "
                          f"does not fit the drafter's {tuple(target.shape)}")
    target.data.copy_(source)
