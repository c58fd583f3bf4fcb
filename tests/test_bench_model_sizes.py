"""recipes/benchmark-model-sizes.sh: a random-weight model of each architecture and random-weight drafters of the
shapes asked for, timed into the documentation section the recipe names (a tiny architecture on the synthetic
corpus, its files renamed en-de as the recipe reads them)."""
import os
import subprocess

import pytest
import torch

from conftest import REPO

RECIPE = REPO / "recipes" / "benchmark-model-sizes.sh"


def run_recipe(tmp_path, *args, **env):
    return subprocess.run(["bash", str(RECIPE), *args], env={**os.environ, **env}, text=True, capture_output=True,
                          cwd=tmp_path, timeout=900)


def as_en_de(data, folder):
    """``data`` (languages src/tgt) as a folder whose files name the languages en/de."""
    folder.mkdir()
    for path in data.iterdir():
        name = path.name.replace("src-tgt", "en-de").replace(".src.", ".en.").replace(".tgt.", ".de.")
        (folder / name).symlink_to(path)
    return folder


def test_a_drafter_shape_that_is_not_n_or_e_plus_n_is_one_line(tmp_path):
    proc = run_recipe(tmp_path, DRAFTER_SHAPES="1 6x6", DATA=str(tmp_path / "none"))
    assert proc.returncode != 0 and proc.stderr.count("\n") == 1, proc.stderr
    assert "DRAFTER_SHAPES: '6x6' is neither N" in proc.stderr


@pytest.mark.slow
def test_each_drafter_shape_is_timed_and_profiled_in_the_section(reverse_data, tmp_path):
    doc = tmp_path / "benchmarks.md"
    proc = run_recipe(tmp_path, "--no-ctranslate2", DATA=str(as_en_de(reverse_data, tmp_path / "data")),
                      OUT_DIR=str(tmp_path / "out"), DOC=str(doc), SECTION_PREFIX="t", ARCHS="specdec_verifier_tiny",
                      DECODERS="beam1,greedy,oracle", DRAFTER_SHAPES="1 3+1", MAX_SENTENCES="4", WARMUP="1",
                      ROUNDS="1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    section = doc.read_text().split("<!-- bench:t-specdec_verifier_tiny-b1 -->")[1]
    for shape in ("1", "3+1"):
        label = f"/specdec_verifier_tiny/drafter-{shape}.pt,draft_length=fixed | 1 |"
        assert section.count(label) == 2, section  # its timed row and its profile row
    layers = {}
    for shape in ("1", "3+1"):
        weights = torch.load(tmp_path / "out" / "specdec_verifier_tiny" / f"drafter-{shape}.pt",
                             weights_only=False)["model"]
        layers[shape] = [len({name.split(".")[2] for name in weights if name.startswith(f"{side}.layers.")})
                         for side in ("encoder", "decoder")]
    assert layers == {"1": [2, 1], "3+1": [3, 1]}  # the verifier's 2 encoder layers, shared; its own 3
