"""The quickstart's demo pair lookup: absent -> the toy pair; broken -> one line naming the file."""
import shutil

import pytest

from fairseq_plugins import quickstart
from fairseq_plugins_compat.errors import PluginError


def fake_demo(folder, verifier):
    folder.mkdir()
    for name in quickstart.DEMO_FILES:
        (folder / name).write_text("x\n")
    shutil.copy(verifier, folder / "verifier.pt")
    shutil.copy(verifier, folder / "drafter.pt")
    return folder


def test_no_demo_folder_means_the_toy_pair(monkeypatch, tmp_path):
    monkeypatch.setattr(quickstart, "DEMO_DIRS", (tmp_path / "absent",))
    assert quickstart.demo_pair() is None


def test_complete_demo_folder_is_used(tiny_checkpoint, tmp_path, monkeypatch):
    folder = fake_demo(tmp_path / "demo", tiny_checkpoint)
    monkeypatch.setattr(quickstart, "DEMO_DIRS", (tmp_path / "absent", folder))
    found, verifier, drafter, sentences, options = quickstart.demo_pair()
    assert found == folder and verifier == folder / "verifier.pt" and sentences == ["x"]
    assert options["sentencepiece_model"] == str(folder / "sentencepiece.model")


@pytest.mark.parametrize("broken", ["dict.de.txt", "drafter.pt"])
def test_broken_demo_folder_is_an_error_naming_the_file(tiny_checkpoint, tmp_path, broken):
    folder = fake_demo(tmp_path / "demo", tiny_checkpoint)
    if broken.endswith(".pt"):
        (folder / broken).write_text("not a checkpoint\n")
        message = f"{broken} is not a readable checkpoint"
    else:
        (folder / broken).unlink()
        message = f"{broken} is missing or empty"
    with pytest.raises(PluginError, match=message):
        quickstart.demo_pair(folder)
