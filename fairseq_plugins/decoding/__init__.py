"""Decoding algorithms, selected with ``--decoding NAME`` on the plugin's task.

Each algorithm module registers an entry under its name (see ``registry``); every module
in this folder is imported here, then the modules named in ``FAIRSEQ_PLUGINS_DECODERS``,
before the task builds its ``--decoding`` choices and options.
"""
from fairseq_plugins.autoimport import import_submodules
from fairseq_plugins.decoding.registry import DECODERS, import_extra_decoders, register_decoder  # noqa: F401

import_submodules(__name__, __path__)
import_extra_decoders()
