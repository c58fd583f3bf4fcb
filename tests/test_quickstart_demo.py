"""The quickstart's demo pair lookup: absent -> the toy pair; broken -> one line naming the file."""
import shutil

import pytest

from fairseq_plugins import quickstart
from fairseq_plugins_compat.errors import PluginError


def fake_demo(folder, verifier, data):
    """A demo folder around the tiny checkpoint: its data's (joined) dictionary on both sides."""
    folder.mkdir()
    for name in quickstart.DEMO_FILES:
        (folder / name).write_text("x\n")
    shutil.copy(verifier, folder / "verifier.pt")
    shutil.copy(verifier, folder / "drafter.pt")
    dictionary = data / "dict.src.txt"
    for name in ("dict.en.txt", "dict.de.txt"):
        shutil.copy(dictionary, folder / name)
    return folder


def test_no_demo_folder_means_the_toy_pair(monkeypatch, tmp_path):
    monkeypatch.setattr(quickstart, "DEMO_DIRS", (tmp_path / "absent",))
    assert quickstart.demo_pair() is None


def test_complete_demo_folder_is_used(reverse_data, tiny_checkpoint, tmp_path, monkeypatch):
    folder = fake_demo(tmp_path / "demo", tiny_checkpoint, reverse_data)
    monkeypatch.setattr(quickstart, "DEMO_DIRS", (tmp_path / "absent", folder))
    found, verifier, drafter, sentences, options = quickstart.demo_pair()
    assert found == folder and verifier == folder / "verifier.pt" and sentences == ["x"]
    assert options["sentencepiece_model"] == str(folder / "sentencepiece.model")


@pytest.mark.parametrize("broken", ["missing dict.de.txt", "garbage drafter.pt", "garbage dict.en.txt",
                                    "short dict.de.txt"])
def test_broken_demo_folder_is_an_error_naming_the_file(reverse_data, tiny_checkpoint, tmp_path, broken):
    how, name = broken.split()
    folder = fake_demo(tmp_path / "demo", tiny_checkpoint, reverse_data)
    path = folder / name
    if how == "missing":
        path.unlink()
        message = f"{name} is missing or empty"
    elif how == "garbage":
        path.write_text("not a checkpoint\n")
        message = f"{name} is not a readable checkpoint" if name.endswith(".pt") else f"{name} is not a fairseq dictionary"
    else:
        path.write_text("".join(path.read_text().splitlines(keepends=True)[:3]))
        message = f"{name} has 7 entries, verifier.pt's decoder embeddings"
    with pytest.raises(PluginError, match=message) as error:
        quickstart.demo_pair(folder)
    assert "\n" not in str(error.value)
