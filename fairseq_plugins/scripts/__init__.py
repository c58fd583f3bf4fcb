"""Command-line tools, run as ``python -m fairseq_plugins.scripts.NAME`` (some also installed as console scripts)."""
import os

from fairseq_plugins_compat.errors import PluginError


def output_file(path: str) -> str:
    """``path``, a file the tool is about to write, with its folder made where missing (as ``mkdir -p``); a folder
    given instead of a file, or a folder that cannot be made, is a one-line error before any work is done."""
    if os.path.isdir(path):
        raise PluginError(f"{path} is a folder: give the file to write")
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as error:
        raise PluginError(f"cannot write {path}: {error.strerror}: {error.filename or folder}") from None
    return path


def save_atomically(obj, path):
    """``torch.save(obj, path)`` (path: str or Path) through ``path.part`` renamed at the end: a killed tool leaves
    no partial file at ``path``, which the recipes take for a finished step."""
    import torch

    part = f"{path}.part"
    torch.save(obj, part)
    os.replace(part, path)
