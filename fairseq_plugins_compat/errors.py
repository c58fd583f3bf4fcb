"""User-facing errors: printed as one line by the hook in ``compat.startup``."""
import sys


class PluginError(Exception):
    """Bad input or an incompatible model/checkpoint, explained in one line."""

    one_line_error = True  # read by compat.startup's excepthook without importing this module


def exit_on_plugin_error(main, prog: str):
    """``main()`` for a command line: a PluginError ends it with one line, ``prog: error:
    message``, on stderr (exit status 1); returns what ``main`` returns."""
    try:
        return main()
    except PluginError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        sys.exit(1)
