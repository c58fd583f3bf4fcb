"""The tools that write a file (export_checkpoint, average_checkpoints, plot_validation) make its missing folder
and refuse a folder given as the file, in one line, before any work."""
import subprocess
import sys

import pytest

from fairseq_plugins.scripts import export_checkpoint, plot_validation
from fairseq_plugins_compat.errors import PluginError
from test_plot_validation import write_log


def test_export_makes_the_missing_folder(tiny_checkpoint, tmp_path, capsys):
    out = tmp_path / "new" / "deeper" / "model.pt"
    export_checkpoint.main([str(tiny_checkpoint), str(out), "--fp16"])
    assert out.is_file() and f"wrote {out}" in capsys.readouterr().out


@pytest.mark.parametrize("module", ["export_checkpoint", "average_checkpoints"])
def test_a_folder_as_the_output_is_one_line(tiny_checkpoint, tmp_path, module):
    args = [str(tiny_checkpoint), str(tmp_path)] if module == "export_checkpoint" else \
        ["--inputs", str(tiny_checkpoint), "--output", str(tmp_path)]
    proc = subprocess.run([sys.executable, "-m", f"fairseq_plugins.scripts.{module}", *args],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1].endswith(f"error: {tmp_path} is a folder: give the file to write")


def test_plot_makes_the_missing_folder_and_refuses_a_folder(tmp_path):
    log = write_log(tmp_path / "a.log", [(1, 140, 1.34), (2, 280, 1.62)])
    out = tmp_path / "plots" / "curve.png"
    plot_validation.main([log, "--out", str(out)])
    assert out.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(PluginError, match="is a folder"):
        plot_validation.main([log, "--out", str(tmp_path)])
