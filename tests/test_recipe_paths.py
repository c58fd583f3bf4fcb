"""Default paths of the recipes: derived from RUNS (recipes/lib/common.sh), none fixed to one machine; the shared
helpers of common.sh that a mistake in a path or a setting reaches."""
import os
import re
import subprocess

import pytest

from conftest import REPO

RECIPES = REPO / "recipes"


def shell(command, **env):
    proc = subprocess.run(["bash", "-c", command], env={**os.environ, **env}, text=True, capture_output=True,
                          cwd="/", timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_runs_defaults_beside_the_checkout_whatever_the_working_directory():
    assert shell(f'. "{RECIPES}/lib/common.sh"; echo "$RUNS"', RUNS="") == str(REPO.parent / "runs")
    assert shell(f'. "{RECIPES}/lib/common.sh"; echo "$RUNS"', RUNS="/data/mine") == "/data/mine"


def test_settings_derive_their_paths_from_runs():
    sourced = shell(f'. "{RECIPES}/lib/common.sh"; . "{RECIPES}/settings/wmt14-ende-verifier.sh"; echo "$DATA $SAVE_DIR"',
                    RUNS="/data/mine", DATA="", SAVE_DIR="", SRC="", TGT="")
    assert sourced == "/data/mine/wmt14-ende/distilled-ende/bin /data/mine/wmt14-ende/checkpoints/verifier-ende"


def test_no_recipe_defaults_into_a_fixed_folder():
    """No ``${NAME:-/absolute/path}``: every default path derives from RUNS or REPO."""
    fixed = re.compile(r'\$\{\w+:-"?/')
    assert fixed.search('OUT=${OUT:-/data/runs}') and not fixed.search('OUT=${OUT:-$RUNS/multi30k}')
    offenders = [str(path.relative_to(RECIPES)) for path in RECIPES.rglob("*.sh") if fixed.search(path.read_text())]
    assert offenders == []


@pytest.mark.parametrize("recipe", ["generate.sh", "train-at.sh"])
def test_an_unknown_setting_is_one_line_naming_the_settings(recipe):
    proc = subprocess.run(["bash", str(RECIPES / recipe)], env={**os.environ, "SETTING": "multi30k-verifer"},
                          text=True, capture_output=True, cwd="/", timeout=60)
    assert proc.returncode != 0 and proc.stderr.count("\n") == 1, proc.stderr
    assert "SETTING=multi30k-verifer: no recipes/settings/multi30k-verifer.sh (settings: " in proc.stderr
    assert " multi30k-verifier " in proc.stderr


def test_a_failed_download_stops_the_recipe_where_it_failed(tmp_path):
    """local_or_fetch runs inside $(...), where set -e does not stop at a failed curl: the recipe must not go on
    with the file it did not get."""
    script = (f'set -euo pipefail; . "{RECIPES}/lib/common.sh"; '
              f'file=$(local_or_fetch "{tmp_path}/none" http://127.0.0.1:9/corpus.txt "{tmp_path}/corpus.txt"); '
              'echo "went on with $file"')
    proc = subprocess.run(["bash", "-c", script], env={**os.environ, "DRY_RUN": "0"}, text=True, capture_output=True,
                          cwd="/", timeout=120)
    assert proc.returncode != 0 and "went on" not in proc.stdout
    assert "download failed: http://127.0.0.1:9/corpus.txt" in proc.stderr, proc.stderr


@pytest.mark.parametrize("script", ["multi30k-cpu.sh", "bring-your-own-model.sh", "distill.sh", "generate.sh",
                                    "benchmark-latency.sh"])
def test_a_recipe_outside_the_environment_is_one_line(tmp_path, script):
    python = tmp_path / "python-without-fairseq"
    python.write_text("#!/usr/bin/env bash\nexit 1\n")
    python.chmod(0o755)
    proc = subprocess.run(["bash", str(RECIPES / script)], env={**os.environ, "PYTHON": str(python), "DATA": "x"},
                          text=True, capture_output=True, cwd=tmp_path, timeout=60)
    assert proc.returncode != 0 and proc.stderr.count("\n") == 1, proc.stderr
    assert "cannot import torch and fairseq: activate the environment of the README install" in proc.stderr


def test_a_switch_that_is_not_0_or_1_is_one_line(tmp_path):
    """DRY_RUN=true must not start the full run (downloads, hours of training) that DRY_RUN=0 starts."""
    proc = subprocess.run(["bash", str(RECIPES / "multi30k-cpu.sh")], env={**os.environ, "DRY_RUN": "true"},
                          text=True, capture_output=True, cwd=tmp_path, timeout=60)
    assert proc.returncode != 0 and proc.stderr.count("\n") == 1, proc.stderr
    assert "DRY_RUN must be 0 or 1, not 'true'" in proc.stderr
