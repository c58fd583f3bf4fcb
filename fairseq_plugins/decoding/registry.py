"""One registry entry per decoding method: the single source of truth.

An entry holds the method's name and help, its options as a dataclass (fields with help
text and optional ``aliases`` in their metadata), whether it needs a drafter checkpoint,
whether its output is greedy decoding's, and its builder.  Everything else is derived:

- the task's ``--decoding`` choices and every decoder option (``--help``): :func:`option_fields`
- the latency harness's specs, option keys/aliases and default list: :func:`benchmark_specs`
- the recipes' decoder list (the harness default) and the parity suites (:func:`entries`)

Decoders register themselves when their module is imported (``decoding/__init__.py``);
more modules can be named in the environment variable ``FAIRSEQ_PLUGINS_DECODERS``
(comma-separated module names or ``.py`` files), e.g. a decoder defined in a test file.
"""
import dataclasses
import os
from dataclasses import dataclass
from typing import Callable, Dict, List, Tuple

from fairseq_plugins_compat.errors import PluginError

EXTRA_DECODERS_ENV = "FAIRSEQ_PLUGINS_DECODERS"


@dataclass(frozen=True)
class DecoderEntry:
    """A decoding method.  ``build(task, models, args, opts) -> generator``, where ``opts``
    is an instance of ``options`` filled from the task's config."""

    name: str
    help: str
    build: Callable
    options: type
    needs_drafter: bool = False
    greedy_equivalent: bool = True  # output == fairseq-generate --beam 1 (parity suites)
    benchmark_presets: Tuple[str, ...] = ()  # extra harness rows, e.g. "specdec++:beta=5,tau=3"

    def option_names(self) -> List[str]:
        return [f.name for f in dataclasses.fields(self.options)]

    def read_options(self, cfg):
        """An ``options`` instance from ``cfg`` (the task config); an option the config does
        not have (a config saved before the option existed) keeps its default."""
        missing = object()
        values = {name: config_value(cfg, name, missing) for name in self.option_names()}
        return self.options(**{name: value for name, value in values.items() if value is not missing})


def config_value(cfg, name, default=None):
    """``cfg.name``, or ``default`` when the config has no such key (omegaconf's struct
    configs raise their own KeyError/AttributeError subclasses for unknown keys)."""
    try:
        return getattr(cfg, name)
    except (AttributeError, KeyError):
        return default


DECODERS: Dict[str, DecoderEntry] = {}


def register_decoder(name: str, help: str, options: type, needs_drafter: bool = False,
                     greedy_equivalent: bool = True, benchmark_presets: Tuple[str, ...] = ()):
    """Decorator registering ``build(task, models, args, opts)`` as ``--decoding name``."""

    def wrapper(build):
        if name in DECODERS or name == "beam":
            raise ValueError(f"decoder {name!r} is registered twice")
        if not dataclasses.is_dataclass(options):
            raise TypeError(f"decoder {name!r}: options must be a dataclass")
        DECODERS[name] = DecoderEntry(name, help, build, options, needs_drafter, greedy_equivalent,
                                      tuple(benchmark_presets))
        return build

    return wrapper


def decoder_names() -> List[str]:
    return ["beam", *DECODERS]


def entries() -> List[DecoderEntry]:
    return list(DECODERS.values())


def option_fields() -> Dict[str, dataclasses.Field]:
    """Every decoder option, once: name -> dataclass field (help in its metadata).

    Decoders share an option by sharing its field (a common options base class); two
    different definitions of one name are a programming error.
    """
    merged: Dict[str, dataclasses.Field] = {}
    for entry in DECODERS.values():
        for f in dataclasses.fields(entry.options):
            known = merged.setdefault(f.name, f)
            if (known.default, known.metadata.get("help")) != (f.default, f.metadata.get("help")):
                raise ValueError(f"decoder option {f.name!r} is defined twice, differently ({entry.name})")
    return merged


def option_aliases() -> Dict[str, str]:
    """Harness spec key -> option name: every option's own name and its ``aliases``."""
    aliases = {}
    for name, f in option_fields().items():
        for key in (name, *f.metadata.get("aliases", ())):
            aliases[key] = name
    return aliases


def benchmark_specs() -> List[str]:
    """The harness's default decoder list: greedy, beam 5, every decoder and its presets."""
    specs = ["beam1", "beam5"]
    for entry in DECODERS.values():
        specs += [entry.name, *entry.benchmark_presets]
    return specs


def import_extra_decoders():
    """Import the modules named in ``FAIRSEQ_PLUGINS_DECODERS`` (names or .py paths)."""
    import importlib
    import importlib.util

    for item in filter(None, (part.strip() for part in os.environ.get(EXTRA_DECODERS_ENV, "").split(","))):
        if item.endswith(".py"):
            module_name = "fairseq_plugins_extra_" + os.path.splitext(os.path.basename(item))[0]
            spec = importlib.util.spec_from_file_location(module_name, item)
            if spec is None or not os.path.isfile(item):
                raise PluginError(f"{EXTRA_DECODERS_ENV}: no such file {item}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            try:
                importlib.import_module(item)
            except ModuleNotFoundError as missing:
                raise PluginError(f"{EXTRA_DECODERS_ENV}: cannot import {item} ({missing}): a module name on "
                                  "PYTHONPATH or a path ending in .py") from None
