"""The shipped demo pair (checkpoints/demo): each shipped drafter loads against the shipped verifier and, with
vanilla SpecDec, leaves the verifier's greedy output unchanged on the demo sentences; and no shipped checkpoint
(checkpoints/*/*.pt) names a path of the machine that trained it."""
from pathlib import Path

import pytest

from fairseq_plugins import quickstart
from fairseq_plugins.api import Translator
from test_script_outputs import machine_paths

DEMO, VERIFIER, _DRAFTER, SENTENCES, OPTIONS = quickstart.demo_pair(
    Path(__file__).resolve().parents[1] / "checkpoints" / "demo")


def load(decoding, **options):
    return Translator.load(str(VERIFIER), str(DEMO), decoding=decoding, max_len_a=1.2, max_len_b=10, **OPTIONS,
                           **options)


@pytest.fixture(scope="module")
def greedy_translations():
    return load("beam", beam=1).translate(SENTENCES)


@pytest.mark.parametrize("drafter", ["drafter.pt", "drafter-beam5.pt"])
def test_shipped_drafter_keeps_greedy_output_with_specdec(drafter, greedy_translations):
    specdec = load("specdec", drafter=str(DEMO / drafter))
    assert specdec.translate(SENTENCES) == greedy_translations
    assert specdec.generator.stats.summary()["mean_accepted_per_iteration"] > 1.5  # the drafts do get accepted


def test_specdecpp_with_the_beam5_drafter_translates_every_sentence():
    specdecpp = load("specdec++", drafter=str(DEMO / "drafter-beam5.pt"))
    translations = specdecpp.translate(SENTENCES)
    assert len(translations) == len(SENTENCES) and all(translations)
    assert specdecpp.generator.stats.summary()["mean_accepted_per_iteration"] > 2.0


@pytest.mark.parametrize("checkpoint", sorted((Path(__file__).resolve().parents[1] / "checkpoints").glob("*/*.pt")),
                         ids=lambda path: f"{path.parent.name}/{path.name}")
def test_a_shipped_checkpoint_names_no_path_of_the_machine_that_trained_it(checkpoint):
    assert machine_paths(checkpoint) == []
