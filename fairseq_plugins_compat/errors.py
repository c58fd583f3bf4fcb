"""User-facing errors: printed as one line by the hook in ``compat.startup``."""


class PluginError(Exception):
    """Bad input or an incompatible model/checkpoint, explained in one line."""

    one_line_error = True  # read by compat.startup's excepthook without importing this module
