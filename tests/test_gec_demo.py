"""recipes/gec/ship.sh and `python -m fairseq_plugins.quickstart --model gec`: a GEC model shipped into a folder
(float16 weights without training state or machine paths, a sentencepiece model without its training paths, the
dictionary, learner sentences), then corrected with iad against both greedy searches; every missing model or file
and every file over the size limit is one error line."""
import os
import re
import subprocess
import sys

import pytest
import torch

from conftest import BIN_DIR, REPO
from fairseq_plugins import quickstart
from fairseq_plugins_compat.checkpoint_loading import load_checkpoint_file
from fairseq_plugins_compat.errors import PluginError

SHIP = REPO / "recipes" / "gec" / "ship.sh"
SHIPPED = ("gec-6x6.pt", "sentencepiece.model", "dict.src.txt", "dict.tgt.txt", "sentences.txt")


@pytest.fixture(scope="module")
def trained_gec(gec_data, gec_model):
    """conftest's tiny GEC model on sentencepiece-encoded data: (checkpoint, data, spm model)."""
    data, checkpoint = gec_model
    return checkpoint, data, gec_data[0] / "spm" / "spm.model"


def ship(env, trained_gec, out_dir):
    """Run ship.sh with the tiny model as gec-6x6; (return code, stdout, stderr)."""
    checkpoint, data, model = trained_gec
    path = os.pathsep.join([str(BIN_DIR), os.environ.get("PATH", "")])
    proc = subprocess.run(["bash", str(SHIP)], text=True, capture_output=True, timeout=300, env={
        **os.environ, "PATH": path, "PYTHON": sys.executable, "MODELS": f"gec-6x6={checkpoint}", "DATA": str(data),
        "SPM_MODEL": str(model), "OUT_DIR": str(out_dir), **env})
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def shipped(trained_gec, tmp_path_factory):
    out = tmp_path_factory.mktemp("shipped") / "gec"
    rc, _, err = ship({}, trained_gec, out)
    assert rc == 0, err[-3000:]
    return out


@pytest.mark.slow
def test_ship_writes_an_inference_only_half_precision_model_without_machine_paths(shipped, trained_gec):
    checkpoint, data, model = trained_gec
    assert sorted(path.name for path in shipped.iterdir()) == sorted(SHIPPED)  # no temporary folder left
    state = load_checkpoint_file(str(shipped / "gec-6x6.pt"))
    assert "last_optimizer_state" not in state and not state["extra_state"]
    assert all(t.dtype == torch.float16 for t in state["model"].values() if t.is_floating_point())
    trained = load_checkpoint_file(str(checkpoint))["model"]
    assert all(torch.equal(trained[name].half(), weight) for name, weight in state["model"].items())
    root = str(data.parent)  # the folder the data, the sentencepiece model and the model were made from
    assert root in repr(load_checkpoint_file(str(checkpoint))["cfg"]) and root not in repr(state["cfg"])
    assert root.encode() in model.read_bytes() and root.encode() not in (shipped / "sentencepiece.model").read_bytes()
    assert (shipped / "dict.src.txt").read_text() == (shipped / "dict.tgt.txt").read_text() \
        == (data / "dict.src.txt").read_text()
    sentences = (shipped / "sentences.txt").read_text().splitlines()
    assert len(sentences) >= 10 and any(" n't " in line for line in sentences)


@pytest.mark.slow
def test_quickstart_corrects_the_shipped_sentences_as_greedy_does(shipped, capsys):
    assert quickstart.main(["--model", "gec", "--gec-dir", str(shipped)]) == 0
    out = capsys.readouterr().out
    n = len((shipped / "sentences.txt").read_text().splitlines())
    assert out.count("\nS: ") == out.count("\nH: ") == n  # every correction printed
    assert f"output identical to stock greedy: iad {n}/{n}, greedy {n}/{n}" in out
    assert re.search(r"iad: [\d.]+x stock fairseq greedy, [\d.]+x the plugin's greedy; [\d.]+ tokens per iter", out)
    assert f"--sentencepiece-model {shipped / 'sentencepiece.model'}" in out and "--decoding iad" in out


@pytest.mark.slow
def test_quickstart_gec_on_text_the_model_copies_accepts_the_copied_drafts(shipped, trained_gec, tmp_path, capsys):
    learned = (trained_gec[1].parent / "raw" / "test.src").read_text()  # JFLEG dev sources, which it learned
    (tmp_path / "in.txt").write_text("the catt sees a dog\n\n" + learned)
    assert quickstart.main(["--model", "gec", "--gec-dir", str(shipped), "--input", str(tmp_path / "in.txt")]) == 0
    out = capsys.readouterr().out
    n = 1 + len(learned.splitlines())  # the empty line is not a sentence
    assert "S: the catt sees a dog" in out and f"output identical to stock greedy: iad {n}/{n}, greedy {n}/{n}" in out
    tokens_per_iteration = float(re.search(r"iad: .* ([\d.]+) tokens per iteration", out).group(1))
    assert tokens_per_iteration > 1.5


@pytest.mark.slow
def test_ship_refuses_a_file_over_the_size_limit_in_one_line(trained_gec, tmp_path):
    model_bytes = trained_gec[0].stat().st_size  # float32 with optimizer state: more than the float16 copy
    limit = model_bytes / 2 ** 20 / 10
    rc, _, err = ship({"MAX_MB": f"{limit:.3f}"}, trained_gec, tmp_path / "gec")
    assert rc == 1
    errors = [line for line in err.splitlines() if "ERROR" in line or "FAILED" in line]
    assert len(errors) == 1 and re.search(rf"ERROR: gec-6x6.pt would be [\d.]+ MiB, over MAX_MB={limit:.3f}", errors[0])
    assert not (tmp_path / "gec" / "gec-6x6.pt").exists()


def test_no_gec_model_is_one_line_saying_how_to_make_one(tmp_path, monkeypatch):
    monkeypatch.setattr(quickstart, "GEC_DIRS", (tmp_path / "checkout", tmp_path / "installed"))
    with pytest.raises(PluginError, match=r"no GEC model in .*checkout or .*installed: .*recipes/gec/ship.sh"):
        quickstart.gec_model()
    (tmp_path / "empty").mkdir()
    with pytest.raises(PluginError, match=r"a model is missing \(no \*.pt\): .*recipes/gec/ship.sh"):
        quickstart.gec_model(tmp_path / "empty")


def test_no_gec_model_on_the_command_line_is_one_line_without_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "fairseq_plugins.quickstart", "--model", "gec", "--gec-dir",
                           str(tmp_path / "absent")], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"quickstart: error: no GEC model in {tmp_path / 'absent'}: {quickstart.MAKE_GEC}"]


@pytest.mark.slow
def test_a_shipped_folder_missing_a_file_names_it(shipped, tmp_path):
    folder = tmp_path / "gec"
    folder.mkdir()
    for name in SHIPPED:
        if name != "sentences.txt":
            (folder / name).symlink_to(shipped / name)
    with pytest.raises(PluginError, match="sentences.txt is missing or empty"):
        quickstart.gec_model(folder)
    with pytest.raises(PluginError, match=r"gec-12x2.pt is missing \(only gec-6x6.pt\)"):
        quickstart.gec_model(shipped, "gec-12x2.pt")
