"""Initialise a drafter's encoder and embeddings from a trained verifier checkpoint.

Copying weights is only meaningful if the receiving encoder *computes the same function*:
the same position table kind and size (learned vs sinusoidal, max source positions), the
same embedding scale (``--no-scale-embedding``), the same layer layout (pre/post norm,
activation, layernorm_embedding) and sizes.  So the drafter first adopts every
encoder-defining option of the verifier (logging each change), then loads the verifier's
encoder weights strictly; ``tests/test_drafter_init.py`` checks that both encoders give
the same output.  The checkpoint is read only with the safe loader.

Decoder (``--init-decoder-from-verifier first|last|none``, default ``first``): the drafter
adopts the verifier's decoder layout (pre/post norm, final norm, position kind) and copies the
verifier's decoder layers where their shapes match -- self-attention, encoder-attention, FFN
and their layer norms -- plus the final layer norm and learned positions.  A drafter with
fewer layers than the verifier takes the verifier's FIRST n layers by default: the drafter's
input embeddings are the verifier's, so layer 1 sees the inputs it was trained on and each
copied layer reads what its predecessor computed in the verifier (a truncated, early-exit
verifier); the last n layers would read embeddings they never saw.  ``last`` is available.

Shared encoder (``--share-verifier-encoder``): the drafter's encoder is the verifier's,
frozen (no gradient, always in eval mode: dropout off), so its output equals the verifier's
encoder output exactly and decoding can reuse the verifier's ``encoder_out``.  With
``--share-all-embeddings`` the decoder's embeddings would be the frozen encoder's: they are
untied instead (the decoder gets its own trainable copy, input and output tied together).
``verifier_encoder_fingerprint`` (see :func:`encoder_fingerprint`) records which verifier.
"""
import argparse
import hashlib
import logging

import torch
from fairseq.models.transformer import TransformerEncoderBase

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
    if getattr(args, "init_decoder_from_verifier", "none") != "none":
        _adopt_decoder_layout(args, verifier)
    if getattr(args, "share_verifier_encoder", False) and args.share_all_embeddings:
        logger.info("--share-verifier-encoder: the decoder's embeddings are untied from the frozen encoder's "
                    "(own trainable copy; input and output stay tied)")
        args.share_all_embeddings = False
        args.share_decoder_input_output_embed = True
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


# options that decide what a decoder layer computes with given weights (sizes are the drafter's own)
DECODER_LAYOUT_OPTIONS = ("decoder_normalize_before", "no_decoder_final_norm", "decoder_learned_pos")
DECODER_DEFAULTS = {"decoder_normalize_before": False, "no_decoder_final_norm": False, "decoder_learned_pos": False}


def _adopt_decoder_layout(args, verifier):
    for name in DECODER_LAYOUT_OPTIONS:
        value = verifier.get(name, DECODER_DEFAULTS[name])
        if getattr(args, name, None) != value:
            logger.info("drafter %s: %r -> %r (decoder initialised from the verifier)", name, getattr(args, name, None), value)
            setattr(args, name, value)


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
    if getattr(args, "init_decoder_from_verifier", "none") != "none":
        copy_verifier_decoder(model.decoder, weights, args.init_decoder_from_verifier, path)
    if getattr(args, "share_verifier_encoder", False):
        args.verifier_encoder_fingerprint = encoder_fingerprint(model.encoder)
        logger.info("shared verifier encoder (frozen), fingerprint %s", args.verifier_encoder_fingerprint)


def _copy_tensor(target, weights, name, path):
    source = weights.get(name)
    if source is None or source.shape != target.shape:
        raise PluginError(f"{path}: {name} {tuple(source.shape) if source is not None else None} "
                          f"does not fit the drafter's {tuple(target.shape)}")
    target.data.copy_(source)


def _layer_pairs(n_drafter, n_verifier, which):
    """(drafter index, verifier index) pairs: the verifier's first or last min(n, m) layers."""
    n = min(n_drafter, n_verifier)
    if which == "first":
        return list(zip(range(n), range(n)))
    return list(zip(range(n_drafter - n, n_drafter), range(n_verifier - n, n_verifier)))


def _load_if_shapes_match(module, state):
    """Load ``state`` into ``module`` if names and shapes are exactly the module's; else False."""
    own = module.state_dict()
    if set(own) != set(state) or any(own[name].shape != state[name].shape for name in own):
        return False
    module.load_state_dict(state, strict=True)
    return True


def copy_verifier_decoder(decoder, weights, which, path):
    """Copy the verifier's decoder layers (``which``: 'first' or 'last' n), final layer norm
    and learned positions into the drafter's ``decoder`` where shapes match; log what was copied."""
    verifier_layers = {int(name.split(".")[2]) for name in weights if name.startswith("decoder.layers.")}
    copied, skipped = [], []
    for mine, theirs in _layer_pairs(len(decoder.layers), len(verifier_layers), which):
        state = _sub_state(weights, f"decoder.layers.{theirs}.")
        (copied if _load_if_shapes_match(decoder.layers[mine], state) else skipped).append(f"{mine}<-{theirs}")
    extras = []
    for name in ("layer_norm", "layernorm_embedding"):
        module, state = getattr(decoder, name), _sub_state(weights, f"decoder.{name}.")
        if module is not None and state and _load_if_shapes_match(module, state):
            extras.append(name)
    extras.append(_copy_positions(decoder, weights))
    logger.info("drafter decoder layers from %s (%s): copied %s%s; %s", path, which, copied or "none",
                f", shapes differ: {skipped}" if skipped else "", ", ".join(extras))


def _copy_positions(decoder, weights):
    positions = decoder.embed_positions
    source = weights.get("decoder.embed_positions.weight")
    if positions is None or not hasattr(positions, "weight"):
        return "positions: sinusoidal or none (nothing to copy)"
    if source is None or source.size(1) != positions.weight.size(1):
        return "positions: not copied (the verifier's are of another kind or size)"
    rows = min(source.size(0), positions.weight.size(0))
    positions.weight.data[:rows] = source[:rows]
    return f"positions: first {rows} of {positions.weight.size(0)} rows"


# -- shared (frozen) verifier encoder ------------------------------------------------------------

class FrozenVerifierEncoder(TransformerEncoderBase):
    """The verifier's encoder inside the drafter: always in eval mode (dropout off) and run
    without gradient, so that its output is exactly the verifier's encoder output."""

    def train(self, mode=True):
        return super().train(False)

    def forward(self, *args, **kwargs):
        with torch.no_grad():
            return super().forward(*args, **kwargs)


def encoder_class(args):
    """The encoder class ``build_model`` uses, after checking ``--share-verifier-encoder``."""
    if not getattr(args, "share_verifier_encoder", False):
        return TransformerEncoderBase
    if not (getattr(args, "init_from_verifier", None) or getattr(args, "verifier_init_applied", False)):
        raise PluginError("--share-verifier-encoder needs --init-from-verifier (the encoder is the verifier's)")
    return FrozenVerifierEncoder


def freeze(module):
    for parameter in module.parameters():
        parameter.requires_grad_(False)


def encoder_fingerprint(encoder_module) -> str:
    """Short sha256 (16 hex digits) of an encoder's weights: see :func:`weights_fingerprint`."""
    return weights_fingerprint(encoder_module.state_dict())


def weights_fingerprint(weights) -> str:
    """Short sha256 (16 hex digits) of {name: tensor} (an encoder's state dict): names, shapes and values rounded
    to float16 then hashed as float32, so that a float32 verifier and its fp16 export match
    (a bf16 export does not).  Buffers without meaning (``version``, ``_float_tensor``) are left out."""
    digest = hashlib.sha256()
    for name, tensor in sorted(weights.items()):
        if name.endswith(("version", "_float_tensor")) or not torch.is_floating_point(tensor):
            continue
        values = tensor.detach().to("cpu", torch.float16).to(torch.float32).contiguous()
        digest.update(f"{name}:{tuple(values.shape)};".encode())
        digest.update(values.numpy().tobytes())
    return digest.hexdigest()[:16]
