"""The file tools that use no fairseq registry start without importing fairseq (and, but for the checkpoint tools,
torch); every other start of the plugin still registers its tasks, models, criterions and decoders."""
import os
import re
import subprocess
import sys

import pytest

from conftest import cli
from fairseq_plugins import NO_REGISTRY_TOOLS, started_as_a_no_registry_tool

TORCH_FREE = ("augment_sources", "gec_score", "plot_validation")
CHECKPOINT_TOOLS = ("average_checkpoints", "copy_layers", "export_checkpoint")


def imported_modules(*command):
    """The modules a ``--help`` run of ``command`` imports (python -X importtime's report on stderr)."""
    proc = subprocess.run([*command, "--help"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return set(re.findall(r"^import time:.*\| +([\w.]+)$", proc.stderr, re.M))


@pytest.mark.parametrize("name", TORCH_FREE + CHECKPOINT_TOOLS)
def test_a_no_registry_tool_starts_without_fairseq(name):
    modules = imported_modules(sys.executable, "-m", f"fairseq_plugins.scripts.{name}")
    assert "fairseq_plugins" in modules and "fairseq" not in modules
    assert ("torch" in modules) == (name in CHECKPOINT_TOOLS)


def test_the_average_console_script_starts_without_fairseq():
    modules = imported_modules(cli("fairseq-average-checkpoints"))
    assert "torch" in modules and "fairseq" not in modules


def test_other_starts_register_the_plugin():
    """Another tool, or the package imported in any other process (this one: python -m pytest), registers the
    plugin's tasks and criterions (fairseq itself imports neither but for --user-dir)."""
    from fairseq.criterions import CRITERION_REGISTRY
    from fairseq.tasks import TASK_REGISTRY

    modules = imported_modules(sys.executable, "-m", "fairseq_plugins.scripts.distill")
    assert {"fairseq_plugins.criterions", "fairseq_plugins.decoding", "fairseq_plugins.tasks"} <= modules
    assert {"speculative_translation", "double_token_translation"} <= set(TASK_REGISTRY)
    assert "glancing_block_loss" in CRITERION_REGISTRY


@pytest.mark.parametrize("argv, orig_argv, expected", [
    (["-m", "a.log"], ["python", "-m", "fairseq_plugins.scripts.plot_validation", "a.log"], True),
    (["-m"], ["python", "-X", "importtime", "-m", "fairseq_plugins.scripts.gec_score"], True),
    (["-m", "fairseq_plugins.scripts.gec_score"], ["python", "-m", "pytest", "fairseq_plugins.scripts.gec_score"],
     False),  # pytest, run with the tool's name as its argument
    (["-m", "--help"], ["python", "-m", "fairseq_plugins.scripts.distill", "--help"], False),
    (["-c", "x"], ["python", "-c", "import fairseq_plugins", "x"], False),
    (["/env/bin/fairseq-average-checkpoints", "--inputs", "a"], ["python", "/env/bin/fairseq-average-checkpoints",
                                                                 "--inputs", "a"], True),
    (["/env/bin/fairseq-train", "data"], ["python", "/env/bin/fairseq-train", "data"], False),
    ([], [], False),
])
def test_which_starts_skip_the_registries(argv, orig_argv, expected):
    assert started_as_a_no_registry_tool(argv, orig_argv) is expected


def test_every_no_registry_tool_is_a_script():
    assert {f"fairseq_plugins.scripts.{name}" for name in TORCH_FREE + CHECKPOINT_TOOLS} == NO_REGISTRY_TOOLS
