"""Registered tasks: every module in this folder is imported (and so registered)."""
from fairseq_plugins.autoimport import import_submodules

import_submodules(__name__, __path__)
