"""install.sh's offline options fail early, in one line, on bad input (nothing is installed or downloaded)."""
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_install(*args):
    return subprocess.run(["bash", str(REPO / "install.sh"), *args], capture_output=True, text=True, timeout=60)


def test_download_without_a_folder_is_a_usage_error():
    proc = run_install("--download")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "usage: bash install.sh --download DIR"


def test_wheelhouse_that_is_not_a_folder_is_a_one_line_error(tmp_path, monkeypatch):
    missing = tmp_path / "no-such-wheelhouse"
    monkeypatch.setenv("WHEELHOUSE", str(missing))
    proc = run_install()
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"install.sh: WHEELHOUSE={missing} is not a folder"
    assert proc.stdout == ""  # stopped before the first step
