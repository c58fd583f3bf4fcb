"""Default paths of the recipes: derived from RUNS (recipes/lib/common.sh), none fixed to one machine."""
import os
import re
import subprocess

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


def test_an_unknown_setting_is_one_line_naming_the_settings():
    proc = subprocess.run(["bash", str(RECIPES / "generate.sh")], env={**os.environ, "SETTING": "multi30k-verifer"},
                          text=True, capture_output=True, cwd="/", timeout=60)
    assert proc.returncode != 0 and proc.stderr.count("\n") == 1, proc.stderr
    assert "SETTING=multi30k-verifer: no recipes/settings/multi30k-verifer.sh (settings: " in proc.stderr
    assert " multi30k-verifier " in proc.stderr
