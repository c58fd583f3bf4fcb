"""Silence the messages fairseq 0.12.2 prints on every command that users cannot act on.

Installed just before ``fairseq`` is first imported (see ``startup``).  Each filter names
the exact message and, where the warning is attributed to fairseq's own code, the module:
the same warning raised by a user's code, and every other warning, still shows.  Nothing
is filtered when Python runs with ``-W``/``PYTHONWARNINGS`` (the user chose what to see).
"""
import logging
import sys
import warnings

# (message regex, category, module regex): warnings emitted on every run, none actionable
FAIRSEQ_WARNINGS = [
    # fairseq passes pin_memory=True to every DataLoader, also on CPU-only machines
    (r"'pin_memory' argument is set as true but no accelerator is found", UserWarning,
     r"torch\.utils\.data\.dataloader"),
    # fairseq's own calls of deprecated torch APIs
    (r"`torch\.cuda\.amp\.\w+\(args\.\.\.\)` is deprecated", FutureWarning, r"fairseq\."),
    (r"Support for mismatched key_padding_mask and attn_mask is deprecated", UserWarning,
     r"torch\.nn\.functional"),
    (r"`torch\.jit\.script` is deprecated", DeprecationWarning, r"torch\.jit\."),
    # import-time deprecations in fairseq's dependencies
    (r"typing\.io is deprecated", DeprecationWarning, r"(antlr4|hydra)\."),
]

# logger name -> message prefixes logged when fairseq is imported
FAIRSEQ_LOG_NOISE = {
    "fairseq.tasks.text_to_speech": ("Please install tensorboardX",),  # only its TTS task uses it
}


class _DropMessages(logging.Filter):
    def __init__(self, prefixes):
        super().__init__()
        self.prefixes = tuple(prefixes)

    def filter(self, record):
        return not str(record.msg).startswith(self.prefixes)


def install_warning_filters():
    if sys.warnoptions:
        return
    for message, category, module in FAIRSEQ_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category, module=module)


def install_log_filters():
    for name, prefixes in FAIRSEQ_LOG_NOISE.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropMessages) for f in logger.filters):
            logger.addFilter(_DropMessages(prefixes))


def install(_module=None):
    """Called with the ``fairseq`` module object before it executes."""
    install_warning_filters()
    install_log_filters()
