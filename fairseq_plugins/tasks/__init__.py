"""Registered tasks (fairseq also auto-imports this folder for ``--user-dir``)."""
from fairseq_plugins.tasks import speculative_translation  # noqa: F401
