"""Decoding algorithms, selected with ``--decoding NAME`` on the plugin's task.

Each algorithm registers a builder ``build(task, models, cfg) -> generator`` under its
name; the task's ``build_generator()`` is the single dispatch point.
"""
from fairseq_plugins.decoding.registry import DECODERS, register_decoder  # noqa: F401
