"""The tools that write a file (export_checkpoint, average_checkpoints, plot_validation) make its missing folder
and refuse a folder given as the file, in one line, before any work; a checkpoint is written whole or not at all."""
import argparse
import os
import subprocess
import sys

import pytest
import torch

from conftest import PLUGIN_DIR
from fairseq_plugins.scripts import export_checkpoint, plot_validation
from fairseq_plugins_compat.checkpoint_loading import load_checkpoint_file
from fairseq_plugins_compat.errors import PluginError
from test_plot_validation import write_log


def test_export_makes_the_missing_folder(tiny_checkpoint, tmp_path, capsys):
    out = tmp_path / "new" / "deeper" / "model.pt"
    export_checkpoint.main([str(tiny_checkpoint), str(out), "--fp16"])
    assert out.is_file() and f"wrote {out}" in capsys.readouterr().out


def test_an_export_killed_while_saving_leaves_no_file(tiny_checkpoint, tmp_path, monkeypatch):
    """The recipes take an existing export for a finished step: a save cut short must not leave one."""
    out = tmp_path / "model.pt"

    def killed(obj, path):
        open(path, "wb").write(b"half a checkpoint")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", killed)
    with pytest.raises(KeyboardInterrupt):
        export_checkpoint.main([str(tiny_checkpoint), str(out), "--fp16"])
    assert not out.exists()


def strings(config, where=""):
    """(dotted name, value) of every string in a saved config (dicts, Namespaces and lists, nested)."""
    members = vars(config) if isinstance(config, argparse.Namespace) else config
    items = members.items() if isinstance(members, dict) else enumerate(members) if isinstance(members, list) else ()
    for key, value in items:
        if isinstance(value, str):
            yield f"{where}{key}", value
        else:
            yield from strings(value, f"{where}{key}.")


def machine_paths(checkpoint) -> list:
    """(dotted name, value) of each setting in a checkpoint file's configs that names a path of the machine that
    wrote it (``export_checkpoint.is_machine_path``)."""
    state = load_checkpoint_file(str(checkpoint))
    return [(name, value) for name, value in strings([state.get("cfg"), state.get("args")])
            if export_checkpoint.is_machine_path(value)]


def test_export_leaves_out_the_machine_paths(tiny_checkpoint, tmp_path):
    """The exported config names no file of the machine that trained the model (data, save and log folders, a
    sentencepiece model); a user dir keeps its folder's name; every other setting and the weights are unchanged."""
    from fairseq import checkpoint_utils

    state = load_checkpoint_file(str(tiny_checkpoint))
    cfg = state["cfg"]
    cfg["common"]["user_dir"], cfg["common"]["tensorboard_logdir"] = str(PLUGIN_DIR), str(tmp_path / "tensorboard")
    cfg["bpe"] = {"_name": "sentencepiece", "sentencepiece_model": str(tmp_path / "spm.model")}
    trained, exported = tmp_path / "trained.pt", tmp_path / "exported.pt"
    torch.save(state, trained)
    before = dict(strings(cfg))
    machine = {name for name, value in before.items() if os.path.isabs(value)}
    assert {"task.data", "checkpoint.save_dir", "common.user_dir", "bpe.sentencepiece_model"} <= machine

    export_checkpoint.export(str(trained), str(exported))
    after = dict(strings(load_checkpoint_file(str(exported))["cfg"]))
    assert [name for name, value in after.items() if os.path.isabs(value) or str(tmp_path) in value] == []
    assert after["common.user_dir"] == "fairseq_plugins" and after["task.data"] == ""
    assert {name: value for name, value in after.items() if name not in machine} == \
        {name: value for name, value in before.items() if name not in machine}
    models, _, _ = checkpoint_utils.load_model_ensemble_and_task([str(exported)],
                                                                  arg_overrides={"data": before["task.data"]})
    assert all(torch.equal(weight, state["model"][name]) for name, weight in models[0].named_parameters())


@pytest.mark.slow
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
