"""Decoding algorithms, selected with ``--decoding NAME`` on the plugin's task.

Each algorithm module registers a builder under its name (see ``registry``); every
module in this folder is imported here, before the task builds its ``--decoding`` choices.
"""
from fairseq_plugins.autoimport import import_submodules
from fairseq_plugins.decoding.registry import DECODERS, register_decoder  # noqa: F401

import_submodules(__name__, __path__)
