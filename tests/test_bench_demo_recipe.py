"""recipes/benchmark-demo.sh in its quick mode (DRY_RUN=1): a few Multi30k lines (tests/fixtures/multi30k)
prepared with the demo pair's own sentencepiece model and dictionaries, then a table per batch size written into
its section of a document, the prose around it kept."""
import os
import re
import subprocess

import pytest

from conftest import REPO, ctranslate2_rows
from fairseq_plugins.decoding.linears import bfloat16_available

MULTI30K_RAW = REPO / "tests" / "fixtures" / "multi30k" / "raw"  # a few Multi30k lines of each split
INT8 = ["greedy:verifier_matmul=int8", "specdec:verifier_matmul=int8", "iad:verifier_matmul=int8"]
BF16 = ["greedy:verifier_matmul=bf16", "specdec:verifier_matmul=bf16"] if bfloat16_available() else []
ROWS = ["beam1", "greedy", "beam5", "specdec", "specdec++:drafter_path=checkpoints/demo/drafter-beam5.pt", "iad",
        "jacobi", "gs-jacobi", "oracle", "bound", "drafter-only", *INT8, *BF16]  # then the CTranslate2 rows
LOSSLESS = ["greedy", "specdec", "iad", "jacobi", "gs-jacobi", "oracle", "bound", "beam1 float32 (ctranslate2)"]


def table_rows(text: str, section: str, batch_size: int) -> dict:
    """The rows at ``batch_size`` of the table in ``section`` of a document: first cell -> the row's cells."""
    table = text.split(f"<!-- bench:{section} -->")[1].split(f"<!-- /bench:{section} -->")[0]
    return {cells[0]: cells for cells in ([cell.strip() for cell in line.split("|")[1:-1]]
                                          for line in table.splitlines()
                                          if re.match(rf"^\| .+ \| {batch_size} \|", line))}


@pytest.mark.slow
@pytest.mark.skipif(not (REPO / "checkpoints" / "demo" / "drafter-beam5.pt").exists(), reason="no demo pair")
def test_demo_benchmark_quick_mode_writes_a_section_per_batch_size(tmp_path):
    pytest.importorskip("ctranslate2")
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\nProse.\n\n<!-- bench:demo-cpu-b1 -->\nold\n<!-- /bench:demo-cpu-b1 -->\n\nMore prose.\n")
    env = {**os.environ, "DRY_RUN": "1", "OUT_DIR": str(tmp_path / "out"), "DOC": str(doc), "MAX_SENTENCES": "4",
           "WARMUP": "0", "BATCH_SIZES": "1,2", "PYTHONPATH": str(REPO),
           "MULTI30K_DIR": str(MULTI30K_RAW)}
    proc = subprocess.run(["bash", str(REPO / "recipes" / "benchmark-demo.sh"), "--rounds", "1"], env=env, cwd=REPO,
                          text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert proc.stdout.strip().splitlines()[-1] == str(doc)
    text = doc.read_text()
    assert text.startswith("# Benchmarks\n\nProse.\n\n<!-- bench:demo-cpu-b1 -->\n") and "\nold\n" not in text
    assert "<!-- /bench:demo-cpu-b1 -->\n\nMore prose.\n\n<!-- bench:demo-cpu-b2 -->" in text
    assert "`/" not in text and str(REPO) not in text  # paths relative to the clone
    for bs in (1, 2):
        rows = table_rows(text, f"demo-cpu-b{bs}", bs)
        assert list(rows) == ROWS + ctranslate2_rows(), bs
        for name in LOSSLESS:  # the last two cells: outputs differing from beam1's and from greedy's
            assert rows[name][-2:] == ["0", "0"], (bs, name)
        assert rows["beam1"][2] == "float32" and rows["beam1 int8 (ctranslate2)"][2] == "int8"
        assert all("int8" in rows[name][2] for name in INT8), (bs, [rows[name][2] for name in INT8])
        assert all(rows[name][2].startswith("bfloat16") for name in BF16), (bs, [rows[name][2] for name in BF16])
        assert (tmp_path / "out" / f"demo-cpu-b{bs}.json").exists()


@pytest.mark.slow
@pytest.mark.skipif(not (REPO / "checkpoints" / "demo" / "drafter.pt").exists(), reason="no demo pair")
def test_do_no_harm_quick_mode_times_a_drafter_that_never_helps(tmp_path):
    """recipes/benchmark-do-no-harm.sh: the demo drafter with each tensor shuffled drafts ~1 token an iteration;
    every row keeps greedy's outputs, in sections harm-cpu-b*. Paths relative to the caller's folder (the recipes
    cd into the clone: they are resolved before)."""
    doc, out = tmp_path / "benchmarks.md", tmp_path / "out"
    env = {**os.environ, "DRY_RUN": "1", "OUT_DIR": "out", "DOC": "benchmarks.md", "MAX_SENTENCES": "3", "WARMUP": "0",
           "DEMO": os.path.relpath(REPO / "checkpoints" / "demo", tmp_path), "BATCH_SIZES": "1",
           "PYTHONPATH": str(REPO), "MULTI30K_DIR": str(MULTI30K_RAW)}
    proc = subprocess.run(["bash", str(REPO / "recipes" / "benchmark-do-no-harm.sh"), "--rounds", "1"], env=env,
                          cwd=tmp_path, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:]
    import torch

    demo = torch.load(REPO / "checkpoints" / "demo" / "drafter.pt", map_location="cpu", weights_only=False)["model"]
    shuffled = torch.load(out / "drafter-shuffled.pt", map_location="cpu", weights_only=False)["model"]
    weight = "decoder.layers.0.fc1.weight"
    assert shuffled[weight].dtype == demo[weight].dtype and not torch.equal(shuffled[weight], demo[weight])
    assert torch.equal(shuffled[weight].flatten().sort().values, demo[weight].flatten().sort().values)
    rows = table_rows(doc.read_text(), "harm-cpu-b1", 1)
    specdec = next(name for name in rows if name.startswith("specdec:drafter_path="))
    assert specdec.endswith("drafter-shuffled.pt") and float(rows[specdec][10]) < 1.1  # tokens an iteration
    assert list(rows) == ["beam1", "greedy", specdec, "iad", "jacobi", "gs-jacobi", "hybrid-jacobi"]
    assert all(cells[-2:] == ["0", "0"] for cells in rows.values()), rows
