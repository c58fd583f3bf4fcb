"""--share-verifier-encoder: the drafter's encoder is the verifier's, frozen, fingerprinted."""
import copy

import pytest
import torch

import drafter_helpers as helpers
from drafter_helpers import DictTask, build_verifier, load_verifier, random_batch
from fairseq_plugins.models.block_drafter import BlockDrafterModel
from fairseq_plugins.models.drafter_init import encoder_fingerprint
from fairseq_plugins_compat.errors import PluginError


def drafter_args(**options):
    return helpers.drafter_args(dropout=0.1, **options)


@pytest.fixture(scope="module")
def verifier(tiny_checkpoint):
    return load_verifier(tiny_checkpoint)


@pytest.fixture(scope="module")
def shared(tiny_checkpoint, verifier):
    args = drafter_args(init_from_verifier=str(tiny_checkpoint), share_verifier_encoder=True)
    torch.manual_seed(0)
    return BlockDrafterModel.build_model(args, DictTask(verifier[1])), args


def test_decoder_embeddings_are_untied_from_the_frozen_encoder(shared, verifier):
    drafter, args = shared
    assert args.share_all_embeddings is False and args.share_decoder_input_output_embed is True
    assert drafter.decoder.embed_tokens is not drafter.encoder.embed_tokens
    assert drafter.decoder.output_projection.weight is drafter.decoder.embed_tokens.weight
    assert torch.equal(drafter.decoder.embed_tokens.weight, verifier[0].decoder.embed_tokens.weight)
    assert drafter.decoder.embed_tokens.weight.requires_grad
    assert not any(p.requires_grad for p in drafter.encoder.parameters())


def test_encoder_output_is_the_verifiers_in_train_mode(shared, verifier):
    drafter, _ = shared
    drafter.train()
    assert drafter.training and drafter.decoder.training and not drafter.encoder.training
    src, src_lengths, _, _ = random_batch(verifier[1], [9, 5, 2], [1, 1, 1], seed=2)
    with torch.no_grad():
        expected = verifier[0].encoder(src, src_lengths=src_lengths)
    actual = drafter.encoder(src, src_lengths=src_lengths)
    again = drafter.encoder(src, src_lengths=src_lengths)
    assert torch.equal(actual["encoder_out"][0], again["encoder_out"][0])  # no dropout
    assert not actual["encoder_out"][0].requires_grad
    # same weights and function; fairseq's legacy TransformerEncoder class can round differently
    assert torch.allclose(actual["encoder_out"][0], expected["encoder_out"][0], atol=1e-6, rtol=0)
    assert torch.allclose(actual["encoder_embedding"][0], expected["encoder_embedding"][0], atol=1e-6, rtol=0)


def test_a_training_step_leaves_the_encoder_untouched(shared, verifier):
    drafter, _ = shared
    drafter = copy.deepcopy(drafter).train()
    before = copy.deepcopy(drafter.encoder.state_dict())
    optimizer = torch.optim.Adam([p for p in drafter.parameters() if p.requires_grad], lr=0.1)
    src, src_lengths, prefix, prefix_lengths = random_batch(verifier[1], [9, 5], [3, 1], seed=3)
    logits, _ = drafter(src, src_lengths, prefix, prefix_lengths=prefix_lengths)
    logits.logsumexp(-1).sum().backward()
    assert all(p.grad is None for p in drafter.encoder.parameters())
    assert drafter.decoder.embed_tokens.weight.grad is not None
    assert drafter.decoder.layers[0].fc1.weight.grad is not None
    optimizer.step()
    # equal_nan: fairseq's sinusoidal positions keep an uninitialised one-element buffer, sometimes NaN
    torch.testing.assert_close(drafter.encoder.state_dict(), before, rtol=0, atol=0, equal_nan=True)


def test_fingerprint_names_the_verifier(shared, verifier, tmp_path):
    drafter, args = shared
    expected = encoder_fingerprint(verifier[0].encoder)
    assert args.verifier_encoder_fingerprint == expected == encoder_fingerprint(drafter.encoder)
    assert len(expected) == 16
    assert encoder_fingerprint(copy.deepcopy(verifier[0].encoder).half()) == expected  # fp16 export
    torch.save(drafter.state_dict(), tmp_path / "drafter.pt")
    saved = copy.deepcopy(args)
    saved.init_from_verifier = "/nonexistent/verifier.pt"  # rebuilt from its own args, without the verifier
    rebuilt = BlockDrafterModel.build_model(saved, DictTask(verifier[1]))
    rebuilt.load_state_dict(torch.load(tmp_path / "drafter.pt"))
    assert encoder_fingerprint(rebuilt.encoder) == expected
    assert not any(p.requires_grad for p in rebuilt.encoder.parameters())
    other = build_verifier(verifier[1], seed=5, encoder_layers=2, encoder_embed_dim=32)
    assert encoder_fingerprint(other.encoder) != expected


def test_sharing_needs_a_verifier(verifier):
    with pytest.raises(PluginError, match="--share-verifier-encoder needs --init-from-verifier"):
        BlockDrafterModel.build_model(drafter_args(share_verifier_encoder=True), DictTask(verifier[1]))
