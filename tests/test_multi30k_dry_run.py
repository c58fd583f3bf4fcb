"""recipes/multi30k-cpu.sh and recipes/multi30k-base.sh in DRY_RUN mode: every stage (data, verifier, averaging,
distillation, drafter, its head, the SpecDec++ drafter, latency table) runs on the few Multi30k sentence pairs
of tests/fixtures/multi30k."""
import os
import re
import subprocess

import pytest
import torch

from conftest import REPO

MULTI30K_RAW = REPO / "tests" / "fixtures" / "multi30k" / "raw"  # the official raw files


@pytest.mark.slow
def test_multi30k_recipe_dry_run(tmp_path):
    # smaller than the dry run's defaults where other tests cover the stage's code (tests/test_double_token_cli.py:
    # both orders side by side; test_byo_recipe.py: drafters and heads): one double-token order, 2 epochs a
    # training (the fewest the verifier's average of 2 checkpoints takes), a 5-update head
    env = {**os.environ, "DRY_RUN": "1", "OUT": str(tmp_path), "PYTHONPATH": str(REPO),
           "MULTI30K_DIR": str(MULTI30K_RAW),
           "DOUBLE_TOKEN_ORDERS": "bidirectional", "DRY_MAX_EPOCH": "2", "HEAD_UPDATES": "5"}
    proc = subprocess.run(["bash", str(REPO / "recipes" / "multi30k-cpu.sh")], env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:]
    for stage in ("1/6 data", "2/6 verifier", "3/6 distillation", "4/6 drafter", "4/6 the drafter's sequential head",
                  "4/6 the SpecDec++ drafter", "5/6 double-token", "6/6 latency"):
        assert stage in proc.stdout
    assert re.search(r"update 5/5: loss [\d.]+ with the head", proc.stdout)
    assert sorted(path.name for path in (tmp_path / "verifier").glob("checkpoint?.pt")) == ["checkpoint1.pt",
                                                                                       "checkpoint2.pt"]
    table = (tmp_path / "results" / "multi30k-test2016.md").read_text()
    assert (tmp_path / "drafter" / "with_head.pt").exists()  # the drafter the latency stage ran
    exported = torch.load(tmp_path / "verifier" / "verifier.pt", map_location="cpu", weights_only=False)
    assert {t.dtype for t in exported["model"].values() if t.is_floating_point()} == {torch.float16}
    assert f"`{tmp_path / 'verifier' / 'verifier.pt'}`" in table  # the verifier every row ran
    rows = re.findall(r"^\| (\S+) \| 1 \|", table, re.M)
    assert {"beam1", "beam5", "specdec", "iad", "gs-jacobi", "drafter-only"} <= set(rows)
    specdecpp_drafter = tmp_path / "drafter-beam5" / "checkpoint_best.pt"  # fine-tuned on beam-5 translations
    assert f"specdec++:drafter_path={specdecpp_drafter}" in rows
    assert (tmp_path / "distilled-beam5" / "bin" / "train.en-de.de.bin").exists()
    for name in ("specdec", "iad", "gs-jacobi", "hybrid-jacobi"):  # lossless: 0 differ from greedy (beam1)
        assert re.search(rf"^\| {re.escape(name)} \| .* \| 0 \|$", table, re.M), name
    assert (tmp_path / "results" / "multi30k-test2016.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "distilled" / "bin" / "train.en-de.de.bin").exists()
    # the double-token system, trained in the background, at beams 1 and 2
    systems = re.findall(r"^\| (\w+) \| \w+ \| (\d) \|", (tmp_path / "double-token" / "results.md").read_text(), re.M)
    assert systems == [("bidirectional", "1"), ("bidirectional", "2")]
    assert "double-token systems:" in proc.stdout
    # the rerun gets the recipe's default DECODERS, so that it does not start python to list them
    from fairseq_plugins.bench.decoders import default_decoders

    rerun_env = {**env, "DECODERS": f"{default_decoders()},oracle,bound"}
    # a drafter training killed after its first validation (checkpoint_best.pt written) resumes on the rerun
    (tmp_path / "drafter" / "training.done").unlink()
    resumed = subprocess.run(["bash", str(REPO / "recipes" / "multi30k-cpu.sh")], text=True, env=rerun_env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    assert resumed.returncode == 0 and "fairseq_cli.train" in resumed.stdout, resumed.stdout[-3000:]
    assert (tmp_path / "drafter" / "training.done").exists()
    rerun = subprocess.run(["bash", str(REPO / "recipes" / "multi30k-cpu.sh")], text=True, env=rerun_env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    assert rerun.returncode == 0 and "fairseq_cli.train" not in rerun.stdout  # every stage skipped
    assert "double-token/results.md has every order" in rerun.stdout  # not decoded again


def run_base_recipe(tmp_path, **settings):
    """recipes/multi30k-base.sh in DRY_RUN mode on the fixture's sentences, at the smallest sizes that still run
    each stage, with ``settings`` on top (environment variables; None: unset); its process, the run asserted ok."""
    env = {**os.environ, "DRY_RUN": "1", "OUT": str(tmp_path), "PYTHONPATH": str(REPO),
           "MULTI30K_DIR": str(MULTI30K_RAW),
           "DRY_MAX_EPOCH": "2", "DRY_MORE_SOURCES": "0", "BATCH_SIZES": "1", **settings}
    env = {name: value for name, value in env.items() if value is not None}
    proc = subprocess.run(["bash", str(REPO / "recipes" / "multi30k-base.sh"), "--no-ctranslate2"], env=env,
                          text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:]
    return proc


@pytest.mark.slow
def test_multi30k_base_recipe_dry_run(tmp_path):
    """recipes/multi30k-base.sh in DRY_RUN mode: data, verifier, its average exported, bring-your-own-model's
    drafters (no latency stage of its own), the pair laid out as checkpoints/demo, and its table in DOC. The
    smallest sizes that still run each stage (the stages themselves: test_byo_recipe.py)."""
    proc = run_base_recipe(tmp_path, HEAD_UPDATES="5", DECODERS="greedy,specdec,specdec++:drafter_path="
                           + str(tmp_path / "pair" / "drafter-beam5.pt"))
    for stage in ("1/5 data", "2/5 Transformer-base verifier", "3/5 its last 2 epochs averaged", "4/6 sequential head",
                  "5/6 SpecDec++ drafter", "6/6 no latency table (BENCH=0)", "5/5 latency tables"):
        assert stage in proc.stdout
    assert sorted(path.name for path in (tmp_path / "pair").iterdir()) == [
        "dict.de.txt", "dict.en.txt", "drafter-beam5.pt", "drafter.pt", "sentencepiece.model", "verifier.pt"]
    assert not (tmp_path / "byo" / "results").exists()
    head = torch.load(tmp_path / "pair" / "drafter.pt", map_location="cpu", weights_only=False)
    assert any("sequential_head" in name for name in head["model"]), "the shipped drafter has no head"
    beam = torch.load(tmp_path / "byo" / "drafter-beam" / "checkpoint_last.pt", map_location="cpu", weights_only=False)
    assert beam["cfg"]["task"]["data"] == str(tmp_path / "byo" / "distilled-beam5" / "bin")  # beam-5 targets
    table = (tmp_path / "benchmarks.md").read_text()
    assert "<!-- bench:base-cpu-b1 -->" in table and "base-cpu-b32" not in table
    rows = dict(re.findall(r"^\| (\S+) \| 1 \| .* \| (\d+) \|$", table, re.M))  # row -> outputs that differ from greedy
    assert rows.get("greedy") == "0" and rows.get("specdec") == "0", table  # the exported shared-encoder drafter runs
    assert any(row.startswith("specdec++:drafter_path=") for row in rows), table
    real = subprocess.run(["bash", str(REPO / "recipes" / "multi30k-base.sh")], text=True, timeout=60,
                          env={**os.environ, "OUT": str(tmp_path), "DRY_RUN": "0"}, capture_output=True)
    assert real.returncode != 0 and "holds a dry run's outputs (DRY_RUN=1)" in real.stderr, real.stderr


@pytest.mark.slow
def test_multi30k_base_recipe_for_a_gpu_without_specdecpp_drafter(tmp_path):
    """DEVICE=cuda's settings (DRY_RUN trains and times on the CPU all the same): the paper's drafter setting on the
    verifier's shared encoder (what CUDA graphs need). SPECDEC_PP=0 (a short run): no SpecDec++ drafter is trained
    or exported, and the latency stage runs its default rows without the specdec++ one instead of asking for
    drafter-beam5.pt."""
    proc = run_base_recipe(tmp_path, HEAD_UPDATES="0", SPECDEC_PP="0", MAX_SENTENCES="3", DEVICE="cuda",
                           DECODERS=None)  # the default rows
    assert "5/6 no SpecDec++ drafter (SPECDEC_PP=0)" in proc.stdout and "no specdec++ row" in proc.stdout
    assert "paper-drafter-table7 settings" in proc.stdout
    drafter = torch.load(tmp_path / "pair" / "drafter.pt", map_location="cpu", weights_only=False)
    assert drafter["cfg"]["model"].share_verifier_encoder is True  # fairseq-train's checkpoint (no head): a Namespace
    assert sorted(path.name for path in (tmp_path / "pair").iterdir()) == [
        "dict.de.txt", "dict.en.txt", "drafter.pt", "sentencepiece.model", "verifier.pt"]
    rows = re.findall(r"^\| (\S+) \| 1 \|", (tmp_path / "benchmarks.md").read_text(), re.M)
    assert {"greedy", "specdec", "iad"} <= set(rows) and not any(row.startswith("specdec++") for row in rows), rows
