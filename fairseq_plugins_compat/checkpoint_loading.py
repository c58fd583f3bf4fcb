"""Safe loading of fairseq checkpoints on torch >= 2.6 (``weights_only=True``).

A checkpoint is a pickle: loading it with ``weights_only=False`` runs whatever code it
carries.  We keep ``weights_only=True`` and allow exactly the classes that fairseq
checkpoints contain.  Anything else fails with :class:`UnsafeCheckpointError`, naming
the class and the opt-in for files you trust (``FAIRSEQ_PLUGINS_TRUST_CHECKPOINTS=1``).
"""
import argparse
import os
import pickle
import re
import typing
import zipfile

import torch

from fairseq_plugins_compat.errors import PluginError

TRUST_ENV_VAR = "FAIRSEQ_PLUGINS_TRUST_CHECKPOINTS"


class CheckpointError(PluginError):
    """A file that cannot be read as a fairseq checkpoint."""


class UnsafeCheckpointError(CheckpointError):
    """A checkpoint that needs a class outside the allowlist."""


def torch_version_tuple(version=None):
    """``'2.13.0+cpu'`` -> ``(2, 13)``."""
    major, minor = re.match(r"(\d+)\.(\d+)", version or torch.__version__).groups()
    return int(major), int(minor)


def needs_safe_loading_shim(version=None):
    """torch 2.6 switched ``torch.load`` to ``weights_only=True`` by default."""
    return torch_version_tuple(version) >= (2, 6)


def _numpy_globals():
    """numpy arrays/scalars/dtypes stored by ``--eval-bleu`` (torch's documented recipe)."""
    import numpy as np

    try:
        from numpy._core.multiarray import _reconstruct, scalar
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import _reconstruct, scalar
    dtype_classes = [type(np.dtype(t)) for t in (np.float16, np.float32, np.float64, np.int32, np.int64, np.bool_)]
    return [_reconstruct, scalar, np.ndarray, np.dtype, *dtype_classes]


def _omegaconf_globals():
    from omegaconf import DictConfig, ListConfig, nodes
    from omegaconf.base import ContainerMetadata, Metadata

    node_classes = [getattr(nodes, name) for name in ("AnyNode", "StringNode", "IntegerNode", "FloatNode", "BooleanNode", "EnumNode") if hasattr(nodes, name)]
    return [DictConfig, ListConfig, ContainerMetadata, Metadata, *node_classes]


def allowed_globals():
    """Every class a ``fairseq-train`` checkpoint (with or without ``--eval-bleu``) holds."""
    return [
        argparse.Namespace,
        typing.Any,  # omegaconf metadata
        *_omegaconf_globals(),
        *_numpy_globals(),
    ]


def _unsupported_global(error):
    """The class named by torch's weights-only unpickler (None for any other failure)."""
    match = re.search(r"GLOBAL ([\w.]+)", str(error))
    return match.group(1) if match else None


TORCH_FILE_MAGIC = (b"PK\x03\x04", b"\x80")  # zip archive (torch >= 1.6), legacy pickle (protocol >= 2)


def check_torch_file(f, path):
    """Raise :class:`CheckpointError` unless ``f`` starts like a file ``torch.save`` writes.

    Text (a README, a dictionary) would otherwise reach the unpickler, whose errors
    (``pop from empty list``, "Weights only load failed") say nothing about the cause."""
    start = f.tell()
    head = f.read(4)
    f.seek(start)
    if not head:
        raise CheckpointError(f"{path} is not a fairseq checkpoint (empty file)")
    if not head.startswith(TORCH_FILE_MAGIC):
        raise CheckpointError(f"{path} is not a fairseq checkpoint (not a torch file)")


def _torch_load(f, map_location, path):
    """``torch.load`` with fairseq's allowlist (everything, with the trust opt-in)."""
    if os.environ.get(TRUST_ENV_VAR) == "1":
        return torch.load(f, map_location=map_location, weights_only=False)
    try:
        with torch.serialization.safe_globals(allowed_globals()):
            return torch.load(f, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        name = _unsupported_global(error)
        if name is None:
            raise
        raise UnsafeCheckpointError(
            f"{path}: refusing to unpickle '{name}', which is not a class fairseq checkpoints "
            f"contain; if you trust this file, set {TRUST_ENV_VAR}=1"
        ) from None


def safe_load(f, map_location=None, path="<checkpoint>"):
    """``torch.load`` with ``weights_only=True`` and fairseq's allowlist.

    Raises :class:`UnsafeCheckpointError` naming the first class outside the allowlist,
    and :class:`CheckpointError` for files that are no torch file or are truncated.
    """
    if getattr(f, "seekable", lambda: False)():
        check_torch_file(f, path)
    try:
        return _torch_load(f, map_location, path)
    except (pickle.UnpicklingError, KeyError, IndexError, UnicodeDecodeError):  # bytes that are no pickle
        raise CheckpointError(f"{path} is not a fairseq checkpoint (corrupt or not a torch file)") from None
    except (RuntimeError, EOFError, ValueError, OSError, zipfile.BadZipFile) as error:
        raise CheckpointError(f"{path}: unreadable or truncated checkpoint ({_first_line(error)})") from None


def _first_line(error):
    """The first sentence of an error message (torch's run to several paragraphs)."""
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0].split(". ")[0]


def check_checkpoint_path(path):
    """One-line errors for a ``--path`` that is missing or a directory."""
    if os.path.isdir(path):
        raise CheckpointError(f"{path} is a directory, not a checkpoint file")
    if not os.path.exists(path):
        raise CheckpointError(f"checkpoint file {path} does not exist")


def load_checkpoint_file(path, map_location="cpu"):
    """Load ``path`` safely and check it is a fairseq checkpoint (has ``model`` weights)."""
    check_checkpoint_path(path)
    with open(path, "rb") as f:
        state = safe_load(f, map_location=map_location, path=path)
    if not isinstance(state, dict) or "model" not in state or not ("cfg" in state or "args" in state):
        raise CheckpointError(f"{path} is not a fairseq checkpoint (expected a dict with 'model' and 'cfg' entries)")
    return state
