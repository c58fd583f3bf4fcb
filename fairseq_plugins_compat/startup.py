"""Interpreter-start hook: installed as ``fairseq_plugins_compat.pth`` in site-packages.

fairseq 0.12.2 breaks on Python >= 3.11 *before* any ``--user-dir`` is read
(``import fairseq`` fails), so its shims must be active from
interpreter start.  This module is imported by the ``.pth`` file for every Python
process of the environment, so it stays tiny: it imports nothing heavy and only

1. lets fairseq's/hydra's dataclass configs keep their instance defaults on 3.11+;
2. registers post-import hooks that patch fairseq modules when (and only when)
   they are first imported (see :mod:`fairseq_plugins_compat.patches` and
   :mod:`fairseq_plugins_compat.cli`), and silences fairseq's noise just before
   ``fairseq`` itself is imported (:mod:`fairseq_plugins_compat.quiet`).
"""
import dataclasses
import importlib.abc
import importlib.util
import sys

_CONFIG_MODULE_PREFIXES = ("fairseq", "hydra", "fairseq_cli", "fairseq_plugins")


def needs_dataclass_default_shim(version=sys.version_info):
    """Python 3.11 rejects unhashable (e.g. dataclass-instance) field defaults."""
    return version >= (3, 11)


def _allow_dataclass_instance_defaults(original_get_field):
    """Wrap ``dataclasses._get_field`` so a config class of fairseq/hydra may use a
    dataclass *instance* as default, as it could before 3.11.  The default stays a
    real ``field.default`` (fairseq's ``hydra_init`` reads it), unlike a
    ``default_factory`` rewrite would."""

    def _get_field(cls, a_name, a_type, *args):
        default = getattr(cls, a_name, dataclasses.MISSING)
        if isinstance(default, dataclasses.Field):
            default = default.default
        default_cls = type(default)
        if (
            getattr(cls, "__module__", "").startswith(_CONFIG_MODULE_PREFIXES)
            and dataclasses.is_dataclass(default_cls)
            and default_cls.__hash__ is None
        ):
            default_cls.__hash__ = object.__hash__  # only while the field is checked
            try:
                return original_get_field(cls, a_name, a_type, *args)
            finally:
                default_cls.__hash__ = None
        return original_get_field(cls, a_name, a_type, *args)

    _get_field.__wrapped__ = original_get_field
    return _get_field


class _PostImportHook(importlib.abc.MetaPathFinder):
    """Runs ``callback(module)`` right after the named module is first executed, and
    ``before(module)`` right before."""

    def __init__(self, callbacks, before=None):
        self.callbacks = callbacks  # module name -> callable(module)
        self.before = before or {}  # module name -> callable(module)

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.callbacks and fullname not in self.before:
            return None
        sys.meta_path.remove(self)  # find the real spec without recursing into us
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        exec_module = spec.loader.exec_module
        before = self.before.get(fullname, _nothing)
        callback = self.callbacks.get(fullname, _nothing)

        def exec_and_patch(module):
            before(module)
            exec_module(module)
            callback(module)

        spec.loader.exec_module = exec_and_patch
        return spec


def _nothing(_module):
    pass


def _run_patch(name, module_name="patches"):
    def callback(module):
        patches = importlib.import_module(f"fairseq_plugins_compat.{module_name}")
        getattr(patches, name)(module)

    return callback


def _one_line_excepthook(previous_hook):
    """Print the project's user-facing errors (``PluginError``) as one line, no traceback."""

    def excepthook(exc_type, exc, tb):
        if getattr(exc_type, "one_line_error", False):
            prog = sys.argv[0].rsplit("/", 1)[-1] if sys.argv and sys.argv[0] else "fairseq"
            print(f"{prog}: error: {exc}", file=sys.stderr)
            return
        previous_hook(exc_type, exc, tb)

    excepthook.one_line = True
    return excepthook


class _ImportingLoader:
    """What hydra's plugin scan needs of ``find_module``'s answer: ``load_module(name)``."""

    @staticmethod
    def load_module(fullname):
        return importlib.import_module(fullname)


def _find_module(finder, fullname, path=None):
    """``FileFinder.find_module`` as before Python 3.12, answered from ``find_spec``."""
    spec = finder.find_spec(fullname)
    return _ImportingLoader() if spec is not None and spec.loader is not None else None


def give_back_find_module():
    """hydra 1.0's plugin scan calls ``importer.find_module`` on pkgutil's ``FileFinder``s,
    which Python 3.12 removed (every fairseq console script then fails in ``hydra_init``).
    Given back at interpreter start, not when hydra is imported: under pytest, hydra (a
    pytest plugin) is imported through pytest's own import hook, ahead of ours."""
    from importlib.machinery import FileFinder

    if not hasattr(FileFinder, "find_module"):
        FileFinder.find_module = _find_module


def install():
    """Activate every shim; safe to call more than once."""
    give_back_find_module()
    if not getattr(sys.excepthook, "one_line", False):
        sys.excepthook = _one_line_excepthook(sys.excepthook)
    if needs_dataclass_default_shim() and not hasattr(dataclasses._get_field, "__wrapped__"):
        dataclasses._get_field = _allow_dataclass_instance_defaults(dataclasses._get_field)
    if any(isinstance(finder, _PostImportHook) for finder in sys.meta_path):
        return
    if "fairseq" in sys.modules:  # imported before the shims (no .pth): quiet from now on
        _run_patch("install", "quiet")(sys.modules["fairseq"])
    sys.meta_path.insert(
        0,
        _PostImportHook(
            {
                "fairseq.checkpoint_utils": _run_patch("patch_checkpoint_utils"),
                "fairseq.utils": _run_patch("patch_utils"),
                "fairseq.trainer": _run_patch("patch_trainer"),
                "fairseq.tasks.translation": _run_patch("patch_translation"),
                "fairseq.data.dictionary": _run_patch("patch_dictionary"),
                "fairseq.data.iterators": _run_patch("patch_iterators"),
                "fairseq.models.fairseq_model": _run_patch("patch_fairseq_model"),
                "fairseq.modules.transformer_layer": _run_patch("patch_transformer_layer"),
                "fairseq.models.distributed_fairseq_model": _run_patch("patch_distributed_model"),
                "fairseq.distributed.utils": _run_patch("patch_distributed_utils"),
                "fairseq.options": _run_patch("patch_options", "cli"),
                "fairseq_cli.generate": _run_patch("patch_generate", "cli"),
                "fairseq_cli.interactive": _run_patch("patch_interactive", "cli"),
                "fairseq_cli.score": _run_patch("patch_score_cli"),
            },
            before={"fairseq": _run_patch("install", "quiet")},
        ),
    )
