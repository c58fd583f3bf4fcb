"""Decoding with a drafter that shares the verifier's encoder: the core encodes once, the
output is greedy's, and a drafter trained on another verifier is refused in one line."""
import argparse

import pytest
import torch
from fairseq import checkpoint_utils
from fairseq.sequence_generator import SequenceGenerator

from drafter_helpers import DictTask, build_verifier
from fairseq_plugins.decoding.compatibility import IncompatibleModelsError, check_compatibility
from fairseq_plugins.decoding.core import SpeculativeConfig, SpeculativeGenerator
from fairseq_plugins.decoding.specdec import BlockDrafter
from fairseq_plugins.models.block_drafter import BlockDrafterModel, tiny_drafter_architecture


@pytest.fixture(scope="module")
def pair(tiny_checkpoint, reverse_data):
    models, _cfg, task = checkpoint_utils.load_model_ensemble_and_task([str(tiny_checkpoint)])
    args = argparse.Namespace(arch="block_drafter_tiny", dropout=0.1, init_from_verifier=str(tiny_checkpoint),
                              share_verifier_encoder=True)
    tiny_drafter_architecture(args)
    torch.manual_seed(0)
    drafter = BlockDrafterModel.build_model(args, DictTask(task.source_dictionary)).eval()
    return models[0].eval(), drafter, task


def test_shared_encoder_runs_once_and_gives_greedy_output(pair):
    verifier, drafter, task = pair
    dataset_task = task
    dataset_task.load_dataset("test")
    dataset = dataset_task.dataset("test")
    sample = dataset.collater([dataset[i] for i in range(6)])
    calls = []
    drafter.encoder.register_forward_hook(lambda *unused: calls.append(1))
    adapter = BlockDrafter(drafter)
    assert adapter.uses_verifier_encoder
    ours = SpeculativeGenerator(verifier, task.target_dictionary, adapter,
                                SpeculativeConfig(block_size=4, max_len_b=30)).generate([verifier], sample)
    greedy = SequenceGenerator([verifier], task.target_dictionary, beam_size=1, max_len_b=30).generate([verifier], sample)
    assert [h[0]["tokens"].tolist() for h in ours] == [h[0]["tokens"].tolist() for h in greedy]
    assert calls == []  # the drafter's own encoder never ran


def test_drafter_of_another_verifier_is_refused(pair):
    verifier, drafter, task = pair
    dictionary = task.target_dictionary
    assert check_compatibility(drafter, verifier, dictionary, dictionary) is None
    other = build_verifier(dictionary, seed=7, encoder_layers=2, encoder_embed_dim=32, decoder_embed_dim=32)
    with pytest.raises(IncompatibleModelsError, match="shares the encoder of the verifier it was trained with"):
        check_compatibility(drafter, other, dictionary, dictionary)
