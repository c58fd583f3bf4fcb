"""fairseq plugin: speculative (SpecDec/GAD), aggressive (IAD), Jacobi and double-token
decoding.  Use it with ``--user-dir fairseq_plugins``.

fairseq auto-imports only ``tasks/`` and ``models/`` of a user dir; everything else that
registers itself (criterions, decoders) is imported here, decoders before the task.

A process started as one of the file tools that use no registry (``NO_REGISTRY_TOOLS``) skips
those imports: it starts without torch and fairseq (~2 s less a start; the recipes start them
after every training).
"""
import os
import sys

import fairseq_plugins_compat  # noqa: F401  (shims; normally already active via the .pth)

# python -m fairseq_plugins.scripts.NAME (or its console script) of the tools that only read and write files:
# no task, model, criterion or decoder of fairseq's registries
NO_REGISTRY_TOOLS = {f"fairseq_plugins.scripts.{name}" for name in (
    "augment_sources", "average_checkpoints", "copy_layers", "export_checkpoint", "gec_score", "plot_validation")}
NO_REGISTRY_CONSOLE_SCRIPTS = {"fairseq-average-checkpoints"}


def started_as_a_no_registry_tool(argv=None, orig_argv=None):
    """Whether this interpreter was started to run one of ``NO_REGISTRY_TOOLS``: ``python -m MODULE ARGS``
    (while the interpreter imports MODULE's packages, sys.argv is ``["-m", *ARGS]`` and sys.orig_argv ends with
    ``MODULE, *ARGS``) or the tool's console script (its path in sys.argv[0])."""
    argv = getattr(sys, "argv", []) if argv is None else argv
    orig_argv = getattr(sys, "orig_argv", []) if orig_argv is None else orig_argv
    if argv[:1] == ["-m"]:
        return len(orig_argv) >= len(argv) and orig_argv[-len(argv)] in NO_REGISTRY_TOOLS
    return bool(argv) and os.path.basename(argv[0]) in NO_REGISTRY_CONSOLE_SCRIPTS


if not started_as_a_no_registry_tool():
    from fairseq_plugins import criterions, decoding, models, tasks  # noqa: F401,E402
