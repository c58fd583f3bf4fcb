"""check_compatibility: every drafter/verifier mismatch reported at once."""
import copy

import pytest

from drafter_helpers import build_drafter, build_verifier, make_dictionary
from fairseq_plugins.decoding.compatibility import IncompatibleModelsError, check_compatibility
from fairseq_plugins_compat.errors import PluginError


@pytest.fixture(scope="module")
def models():
    dictionary = make_dictionary()
    return build_drafter(dictionary, block_size=4), build_verifier(dictionary), dictionary


def test_matching_models_pass(models):
    drafter, verifier, dictionary = models
    assert check_compatibility(drafter, verifier, dictionary, copy.deepcopy(dictionary)) is None
    assert check_compatibility(drafter, verifier, dictionary, dictionary, block_size=4) is None
    assert check_compatibility(drafter, verifier, dictionary, dictionary, block_size=2) is None  # first 2 of 4


def test_every_mismatch_is_reported_at_once(models):
    drafter, _, dictionary = models
    other = make_dictionary()
    other.symbols[7], other.symbols[8] = other.symbols[8], other.symbols[7]  # same size, reordered words
    other.add_symbol("extra")
    other.unk_index = 0
    verifier = build_verifier(other, max_source_positions=512, max_target_positions=1024)
    with pytest.raises(IncompatibleModelsError) as info:
        check_compatibility(drafter, verifier, dictionary, other, block_size=6)
    error = info.value
    assert isinstance(error, PluginError)
    text = str(error)
    assert "incompatible (6 problems)" in text and "\n" not in text
    assert "unk index differs: drafter 3, verifier 0" in text
    assert "dictionary sizes differ: drafter 24, verifier 25" in text
    assert "dictionaries differ at 2 indices, first at 7: drafter 'w3', verifier 'w4'" in text
    assert "sources of up to 256 tokens, the verifier 512" in text
    assert "260 target positions, fewer than the verifier's 1024" in text
    assert "blocks of 6 tokens but the drafter was trained with block size 4" in text
    assert len(error.problems) == 6


def test_models_that_do_not_match_their_dictionaries_or_roles(models):
    drafter, verifier, dictionary = models
    smaller = make_dictionary(n_words=10)
    with pytest.raises(IncompatibleModelsError) as info:
        check_compatibility(verifier, drafter, smaller, smaller)  # roles swapped, wrong dictionaries
    problems = info.value.problems
    assert any("the drafter has 24 target embeddings but its dictionary 14 symbols" in p for p in problems)
    assert any("is no block drafter" in p for p in problems)
    assert any("the verifier (BlockDrafterModel) is a block drafter" in p for p in problems)


@pytest.mark.slow
def test_verifier_preset_and_a_drafter_initialised_from_it_are_compatible(reverse_data, tmp_path):
    """specdec_verifier_tiny trains with stock fairseq-train; a drafter initialised from it passes."""
    from fairseq import checkpoint_utils

    from conftest import PLUGIN_DIR, TRAIN_FLAGS, run_cli

    run_cli("fairseq-train", reverse_data, "--user-dir", PLUGIN_DIR, "--arch", "specdec_verifier_tiny",
            "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1", *TRAIN_FLAGS,
            "--max-update", 5, "--save-dir", tmp_path / "verifier", "--no-epoch-checkpoints")
    verifier_path = tmp_path / "verifier" / "checkpoint_last.pt"
    run_cli("fairseq-train", reverse_data, "--user-dir", PLUGIN_DIR, "--task", "speculative_translation",
            "--arch", "block_drafter_tiny", "--criterion", "glancing_block_loss", *TRAIN_FLAGS, "--max-update", 5,
            "--init-from-verifier", verifier_path, "--save-dir", tmp_path / "drafter", "--no-epoch-checkpoints")
    verifiers, _, verifier_task = checkpoint_utils.load_model_ensemble_and_task([str(verifier_path)])
    drafters, _, drafter_task = checkpoint_utils.load_model_ensemble_and_task([str(tmp_path / "drafter" / "checkpoint_last.pt")])
    assert verifiers[0].encoder.embed_positions.__class__.__name__ == "SinusoidalPositionalEmbedding"
    assert verifiers[0].max_positions() == (256, 256) and drafters[0].max_positions() == (256, 260)
    check_compatibility(drafters[0], verifiers[0], drafter_task.target_dictionary, verifier_task.target_dictionary,
                        block_size=drafters[0].block_size)
