"""Initialising the drafter from a verifier: the drafter's encoder computes the verifier's."""
import argparse
import copy

import pytest
import torch
from fairseq.data import Dictionary

from drafter_helpers import DictTask, drafter_args, load_verifier, random_batch
from fairseq_plugins.models.block_drafter import BlockDrafterModel
from fairseq_plugins_compat.errors import PluginError


@pytest.fixture(scope="module")
def verifier(tiny_checkpoint):
    return load_verifier(tiny_checkpoint)


@pytest.fixture(scope="module")
def initialised(tiny_checkpoint, verifier):
    _, dictionary = verifier
    args = drafter_args(init_from_verifier=str(tiny_checkpoint))
    before = copy.deepcopy(args)
    return BlockDrafterModel.build_model(args, DictTask(dictionary)).eval(), args, before


def test_drafter_adopts_the_verifier_encoder_options(initialised):
    _, args, before = initialised
    # the tiny drafter preset asks for learned positions and GELU; the verifier (stock
    # `transformer`) has sinusoidal positions and ReLU: the encoder must follow the verifier
    assert before.encoder_learned_pos is True and before.activation_fn == "gelu"
    assert args.encoder_learned_pos is False and args.activation_fn == "relu"
    # the decoder is initialised from the verifier's: it adopts the verifier's (sinusoidal) positions
    assert before.decoder_learned_pos is True and args.decoder_learned_pos is False
    assert args.max_source_positions == 1024 and args.max_target_positions == 1024 + 4  # verifier's + k
    assert args.verifier_init_applied is True


def test_initialised_encoder_computes_the_verifier_encoder(verifier, initialised):
    verifier_model, dictionary = verifier
    drafter = initialised[0]
    src, src_lengths, _, _ = random_batch(dictionary, [9, 5, 2], [1, 1, 1], seed=1)
    with torch.no_grad():
        expected = verifier_model.encoder(src, src_lengths=src_lengths)
        actual = drafter.encoder(src, src_lengths=src_lengths)
    assert torch.allclose(actual["encoder_out"][0], expected["encoder_out"][0], atol=1e-6)
    assert torch.allclose(actual["encoder_embedding"][0], expected["encoder_embedding"][0], atol=1e-6)
    assert drafter.encoder.embed_scale == verifier_model.encoder.embed_scale
    assert torch.equal(drafter.decoder.embed_tokens.weight, verifier_model.decoder.embed_tokens.weight)


def test_naive_weight_copy_would_not_compute_the_same(verifier):
    """A naive weight copy: same weights, different position table and activation."""
    verifier_model, dictionary = verifier
    naive = BlockDrafterModel.build_model(drafter_args(), DictTask(dictionary)).eval()
    shared = {k: v for k, v in verifier_model.encoder.state_dict().items() if "embed_positions" not in k}
    naive.encoder.load_state_dict(shared, strict=False)
    src, src_lengths, _, _ = random_batch(dictionary, [9, 5], [1, 1], seed=1)
    with torch.no_grad():
        diff = naive.encoder(src, src_lengths)["encoder_out"][0] - verifier_model.encoder(src, src_lengths)["encoder_out"][0]
    assert diff.abs().max() > 1e-2


def test_rebuilding_from_saved_args_needs_no_verifier_file(initialised, verifier):
    _, args, _ = initialised
    saved = copy.deepcopy(args)
    saved.init_from_verifier = "/nonexistent/checkpoint.pt"  # e.g. a drafter copied to another machine
    rebuilt = BlockDrafterModel.build_model(saved, DictTask(verifier[1]))
    assert rebuilt.encoder.embed_positions.__class__ is initialised[0].encoder.embed_positions.__class__


def test_verifier_with_another_dictionary_is_refused(tiny_checkpoint, verifier):
    bigger = copy.deepcopy(verifier[1])
    bigger.add_symbol("an-extra-word")
    with pytest.raises(PluginError, match="same dictionary"):
        BlockDrafterModel.build_model(drafter_args(init_from_verifier=str(tiny_checkpoint)), DictTask(bigger))


def test_missing_verifier_file_is_a_clear_error(tmp_path):
    with pytest.raises(PluginError, match="no such checkpoint|does not exist"):
        BlockDrafterModel.build_model(drafter_args(init_from_verifier=str(tmp_path / "none.pt")), DictTask(Dictionary()))


def test_drafter_wider_than_the_verifier_is_refused(tiny_checkpoint, verifier):
    args = drafter_args(init_from_verifier=str(tiny_checkpoint), decoder_embed_dim=48, decoder_input_dim=48, decoder_output_dim=48)
    with pytest.raises(PluginError, match="decoder dim 48"):
        BlockDrafterModel.build_model(args, DictTask(verifier[1]))


def test_decoder_layers_are_the_verifiers_first_layers(verifier, initialised, caplog):
    verifier_model = verifier[0]
    drafter = initialised[0]
    assert len(drafter.decoder.layers) == len(verifier_model.decoder.layers) == 2
    for mine, theirs in zip(drafter.decoder.layers, verifier_model.decoder.layers):
        expected = theirs.state_dict()
        for name, tensor in mine.state_dict().items():
            assert torch.equal(tensor, expected[name]), name
    assert drafter.decoder.layer_norm is None and verifier_model.decoder.layer_norm is None  # post-norm both


def test_no_decoder_init_keeps_a_fresh_decoder(tiny_checkpoint, verifier):
    args = drafter_args(init_from_verifier=str(tiny_checkpoint), init_decoder_from_verifier="none")
    drafter = BlockDrafterModel.build_model(args, DictTask(verifier[1]))
    assert args.decoder_learned_pos is True  # the drafter's own option
    fresh, copied = drafter.decoder.layers[0].fc1.weight, verifier[0].decoder.layers[0].fc1.weight
    assert not torch.equal(fresh, copied)


def save_fake_verifier(path, model, args):
    plain = {name: value for name, value in vars(args).items() if isinstance(value, (bool, int, float, str, type(None)))}
    torch.save({"cfg": {"model": plain}, "model": model.state_dict()}, path)
    return str(path)


@pytest.fixture(scope="module")
def deep_verifier(tmp_path_factory):
    """A random pre-norm 3-decoder-layer verifier (final decoder layer norm) saved as a checkpoint."""
    from fairseq.models.transformer import TransformerModel

    from drafter_helpers import make_dictionary
    from fairseq_plugins.models.verifier_archs import specdec_verifier_tiny

    dictionary = make_dictionary()
    args = argparse.Namespace(arch="specdec_verifier_tiny", dropout=0.0, decoder_layers=3, encoder_normalize_before=True,
                              decoder_normalize_before=True, decoder_learned_pos=True)
    specdec_verifier_tiny(args)
    torch.manual_seed(3)
    model = TransformerModel.build_model(args, DictTask(dictionary)).eval()
    path = save_fake_verifier(tmp_path_factory.mktemp("deep") / "v.pt", model, args)
    return model, dictionary, path


@pytest.mark.parametrize("which,taken", [("first", [0, 1]), ("last", [1, 2])])
def test_shallower_drafter_takes_the_first_or_last_layers(deep_verifier, which, taken):
    model, dictionary, path = deep_verifier
    args = drafter_args(init_from_verifier=path, init_decoder_from_verifier=which)
    drafter = BlockDrafterModel.build_model(args, DictTask(dictionary))
    assert args.decoder_normalize_before is True
    for mine, theirs in zip(drafter.decoder.layers, taken):
        assert torch.equal(mine.fc2.weight, model.decoder.layers[theirs].fc2.weight)
        assert torch.equal(mine.encoder_attn.k_proj.weight, model.decoder.layers[theirs].encoder_attn.k_proj.weight)
        assert torch.equal(mine.self_attn_layer_norm.weight, model.decoder.layers[theirs].self_attn_layer_norm.weight)
    assert torch.equal(drafter.decoder.layer_norm.weight, model.decoder.layer_norm.weight)
    rows = model.decoder.embed_positions.weight.size(0)  # the drafter's table is k rows longer
    assert drafter.decoder.embed_positions.weight.size(0) == rows + 4
    assert torch.equal(drafter.decoder.embed_positions.weight[:rows], model.decoder.embed_positions.weight)


def test_layers_of_another_shape_are_skipped(deep_verifier):
    model, dictionary, path = deep_verifier
    args = drafter_args(init_from_verifier=path, decoder_ffn_embed_dim=48)
    drafter = BlockDrafterModel.build_model(args, DictTask(dictionary))
    assert drafter.decoder.layers[0].fc1.weight.shape == (48, 32)  # left as initialised
    assert torch.equal(drafter.decoder.layer_norm.weight, model.decoder.layer_norm.weight)
