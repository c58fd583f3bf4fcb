"""recipes/double-token/ship.sh and recipes/double-token/benchmark.sh: a pair trained on Multi30k prepared with the
demo pair's sentencepiece model and dictionaries is shipped as float16 copies, refused when its dictionaries are not
the demo pair's or a file would be too large, and timed side by side into its section of a document."""
import os
import re
import subprocess

import pytest

from conftest import REPO

MULTI30K_RAW = REPO / "tests" / "fixtures" / "multi30k" / "raw"  # a few Multi30k lines of each split
RECIPES = REPO / "recipes"


def bash(command, env, timeout=600):
    proc = subprocess.run(["bash", "-c", command], cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO), "MULTI30K_DIR": str(MULTI30K_RAW), **env},
                          text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    return proc.returncode, proc.stdout


@pytest.mark.slow
@pytest.mark.skipif(not (REPO / "checkpoints" / "demo" / "sentencepiece.model").exists(), reason="no demo pair")
def test_pair_is_shipped_and_timed_into_its_section(tmp_path):
    import torch

    out = tmp_path / "out"
    env = {"DRY_RUN": "1", "OUT_DIR": str(out)}
    rc, log = bash(f'. {RECIPES}/lib/common.sh; . {RECIPES}/lib/demo_data.sh; demo_test_data "$OUT_DIR" test', env)
    assert rc == 0, log[-4000:]
    data, models = out / "data" / "bin", tmp_path / "models"
    rc, log = bash(f"bash {RECIPES}/double-token/train-multi30k.sh --max-epoch 1",
                   {"DRY_RUN": "1", "DATA": str(data), "SAVE_ROOT": str(models),
                    "ORDERS": "single_l2r bidirectional"})
    assert rc == 0, log[-4000:]
    pair = tmp_path / "pair"
    ship = {"SINGLE": str(models / "single_l2r" / "checkpoint_last.pt"), "DATA": str(data), "OUT_DIR": str(pair),
            "BIDIRECTIONAL": str(models / "bidirectional" / "checkpoint_last.pt")}
    rc, log = bash(f"bash {RECIPES}/double-token/ship.sh", {**ship, "MAX_MB": "0.1"})
    assert rc != 0 and "over MAX_MB=0.1: not shipped" in log.splitlines()[-1], log[-4000:]
    assert not list(pair.glob("*.pt"))
    other = tmp_path / "other"  # the same dictionaries but one entry
    other.mkdir()
    for lang in ("en", "de"):
        lines = (data / f"dict.{lang}.txt").read_text().splitlines(keepends=True)
        (other / f"dict.{lang}.txt").write_text("".join(lines[:-1]) + "zzzz 1\n")
    rc, log = bash(f"bash {RECIPES}/double-token/ship.sh", {**ship, "DATA": str(other)})
    assert rc != 0 and "is not the demo pair's" in log.splitlines()[-1], log[-4000:]
    rc, log = bash(f"bash {RECIPES}/double-token/ship.sh", ship)
    assert rc == 0, log[-4000:]
    assert sorted(p.name for p in pair.iterdir()) == ["bidirectional.pt", "single_l2r.pt"]
    for name in ("single_l2r", "bidirectional"):
        state = torch.load(pair / f"{name}.pt", map_location="cpu", weights_only=False)
        assert state["cfg"]["task"]["target_order"] == name
        assert all(t.dtype == torch.float16 for t in state["model"].values() if t.is_floating_point())
        assert str(tmp_path) not in str(state["cfg"]), name  # no paths of the machine that trained it

    rc, log = bash(f"bash {RECIPES}/double-token/benchmark.sh", {**env, "PAIR": str(tmp_path / "none")})
    assert rc != 0 and "no double-token pair in PAIR=" in log.splitlines()[-1] and "ship.sh" in log, log[-4000:]
    doc = tmp_path / "double-token.md"
    doc.write_text("# Double-token\n\nProse.\n\n<!-- bench:double-token-cpu -->\nold\n"
                   "<!-- /bench:double-token-cpu -->\n\nMore prose.\n")
    rc, log = bash(f"bash {RECIPES}/double-token/benchmark.sh",
                   {**env, "PAIR": str(pair), "DOC": str(doc), "MAX_SENTENCES": "3", "WARMUP": "0"})
    assert rc == 0, log[-4000:]
    assert log.strip().splitlines()[-1] == str(doc)
    text = doc.read_text()
    assert text.startswith("# Double-token\n\nProse.\n\n<!-- bench:double-token-cpu -->\n") and "\nold\n" not in text
    assert text.endswith("<!-- /bench:double-token-cpu -->\n\nMore prose.\n")
    rows = [line.split("|")[1:4] for line in text.splitlines() if re.match(r"^\| (single_l2r|bidirectional) ", line)]
    assert [[cell.strip() for cell in row] for row in rows] == [
        ["single_l2r", "single_l2r", "1"], ["single_l2r", "single_l2r", "5"],
        ["bidirectional", "bidirectional", "1"], ["bidirectional", "bidirectional", "5"]]
    assert (out / "double-token-cpu.json").exists()
