"""Decoder specs of the latency harness: ``--decoders beam1,beam5,specdec++:beta=5,tau=3,iad``.

A spec is a name with optional ``key=value`` options after a colon.  Options are
separated by commas like the specs themselves: an item with ``=`` and no colon belongs
to the spec before it, so ``specdec++:beta=5,tau=3,iad`` is two specs.

- ``beamN`` (``beam1``: greedy, ``beam5``): fairseq's own SequenceGenerator, ``--beam N``.
- any name registered with ``--decoding`` (greedy, specdec, specdec++, iad, jacobi, gs-jacobi,
  hybrid-jacobi, drafter-only): the plugin's decoder, built by the task.
- ``oracle`` (``oracle:k=10``) and ``bound``: reference rows of the harness that replay the
  greedy outputs of ``beam1`` (see ``bench.oracle``).
- ``model=NAME`` (any spec but those two): the row decodes with the harness's other model NAME
  (``--model NAME=CHECKPOINT``) instead of ``--path``, e.g. ``iad:model=12x2``.

Option keys, their aliases, which decoders need a drafter and the default list all come
from the decoder registry (``fairseq_plugins.decoding.registry``).
"""
import re
from dataclasses import dataclass, field, fields
from typing import Dict, List, Optional

from fairseq_plugins_compat.errors import PluginError

# harness-only rows replaying beam1's greedy outputs (bench.oracle): name -> what it is
REFERENCE_ROWS = {"oracle": "the speculative core with a drafter that drafts the greedy output (k tokens)",
                  "bound": "encoder + one teacher-forced pass of the lean verifier over the greedy output"}
MODEL_KEY = "model"  # the spec option naming another model of the harness (--model NAME=CHECKPOINT)


def default_decoders() -> str:
    """The harness's default ``--decoders``: every registered decoder and its presets, ``greedy`` (the
    plugin's, the reference of what drafting adds) next to ``beam1`` (fairseq's)."""
    from fairseq_plugins.decoding.registry import benchmark_specs

    specs = benchmark_specs()
    if "greedy" in specs:
        specs.remove("greedy")
        specs.insert(specs.index("beam1") + 1, "greedy")
    return ",".join(specs)


@dataclass
class DecoderSpec:
    """One row of the benchmark: how to build its generator."""

    label: str  # as written on the command line, e.g. "specdec++:beta=5,tau=3"
    decoding: str  # the task's --decoding value ("beam" for fairseq's search)
    beam: int = 1  # --beam for decoding == "beam"
    options: Dict[str, object] = field(default_factory=dict)  # task cfg field -> value
    model: Optional[str] = None  # the harness's other model (--model NAME=...) this row decodes with; None: --path

    @property
    def is_greedy_search(self) -> bool:
        """fairseq's greedy search (``beam1``), on any model: one decoder step per output token."""
        return self.decoding == "beam" and self.beam == 1

    @property
    def is_greedy(self) -> bool:
        """fairseq's greedy search on --path: the row every comparison and replay starts from."""
        return self.is_greedy_search and self.model is None

    @property
    def replays_greedy(self) -> bool:
        """``oracle`` and ``bound``: built from beam1's outputs, not by the task."""
        return self.decoding in REFERENCE_ROWS


def split_specs(text: str) -> List[str]:
    """``"a,b:x=1,y=2,c"`` -> ``["a", "b:x=1,y=2", "c"]``."""
    specs: List[str] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        if "=" in item and ":" not in item:
            if not specs or ":" not in specs[-1]:
                raise PluginError(f"--decoders: option {item!r} does not follow a 'name:key=value' spec")
            specs[-1] += "," + item
        else:
            specs.append(item)
    return specs


def _value(text: str):
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


def parse_spec(text: str, known: List[str]) -> DecoderSpec:
    """Parse one spec; ``known``: the registered ``--decoding`` names."""
    name, _, opts = text.partition(":")
    match = re.fullmatch(r"beam(\d+)", name)
    if match:
        spec = DecoderSpec(text, "beam", beam=int(match.group(1)))
    elif (name in known or name in REFERENCE_ROWS) and name != "beam":
        spec = DecoderSpec(text, name)
    else:
        choices = ", ".join(["beamN (beam1, beam5, ...)", *[n for n in known if n != "beam"], *REFERENCE_ROWS])
        raise PluginError(f"--decoders: unknown decoder {name!r}; choose from {choices}")
    keys = _option_keys(spec.decoding)
    for item in filter(None, opts.split(",")):
        key, eq, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if key == MODEL_KEY and eq and not spec.replays_greedy:
            spec.model = value.strip()
            continue
        if not eq or key not in keys:
            raise PluginError(f"--decoders: bad option {item!r} in {text!r}; keys of {name}: "
                              f"{', '.join(sorted(keys) + ([] if spec.replays_greedy else [MODEL_KEY]))}")
        spec.options[keys[key]] = _value(value.strip())
    _check_values(spec)
    if spec.beam < 1:
        raise PluginError(f"--decoders: {text!r}: the beam size must be >= 1")
    block_size = spec.options.get("block_size", 1) if spec.decoding == "oracle" else 1
    if not isinstance(block_size, int) or block_size < 1:
        raise PluginError(f"--decoders: {text!r}: k must be an integer >= 1")
    return spec


def _check_values(spec: DecoderSpec):
    """A one-line error for an option value its decoder's config would refuse (a bad choice, a
    word for a number), before any model loads."""
    from omegaconf import OmegaConf
    from omegaconf.errors import ValidationError

    from fairseq_plugins.decoding.registry import DECODERS

    for name, value in spec.options.items():
        owner = next(e.options for e in DECODERS.values() if name in {f.name for f in fields(e.options)})
        try:
            setattr(OmegaConf.structured(owner), name, value)
        except ValidationError as error:
            raise PluginError(f"--decoders: {spec.label!r}: {name}: {str(error).splitlines()[0]}") from None


def _option_keys(decoding: str) -> Dict[str, str]:
    """Spec key (option name or alias) -> task option, for the options ``decoding`` reads."""
    from fairseq_plugins.decoding.registry import DECODERS, option_aliases

    if decoding in REFERENCE_ROWS:  # oracle: k and the verifier's products; bound: its products
        own = {"block_size", "verifier_matmul"} if decoding == "oracle" else {"verifier_matmul"}
    elif decoding not in DECODERS:
        return {}
    else:
        own = set(DECODERS[decoding].option_names())
    return {key: name for key, name in option_aliases().items() if name in own}


def _needs_drafter(decoding: str) -> bool:
    from fairseq_plugins.decoding.registry import DECODERS

    return decoding in DECODERS and DECODERS[decoding].needs_drafter


def parse_decoders(text: str, known: List[str]) -> List[DecoderSpec]:
    """All specs of ``--decoders``, in order; labels must be unique."""
    specs = [parse_spec(s, known) for s in split_specs(text)]
    labels = [s.label for s in specs]
    duplicates = sorted({label for label in labels if labels.count(label) > 1})
    if duplicates:
        raise PluginError(f"--decoders: listed twice: {', '.join(duplicates)}")
    if not specs:
        raise PluginError("--decoders: no decoder given")
    return specs


def missing_inputs(spec: DecoderSpec, drafter_path: Optional[str]) -> Optional[str]:
    """Why ``spec`` cannot run with the inputs given, or None."""
    if _needs_drafter(spec.decoding) and not (spec.options.get("drafter_path") or drafter_path):
        return f"needs a block drafter checkpoint: pass --drafter-path (or {spec.decoding}:drafter_path=PATH)"
    return None


def configure(task, generation, spec: DecoderSpec, base: Dict[str, object], drafter_path: Optional[str]):
    """Set the task cfg (``--decoding``, drafter, block size, beta, tau...) and the
    generation cfg (``--beam``) for ``spec``; ``base``: the task fields as first loaded.
    Options the spec's decoder does not read are reset to their defaults."""
    from fairseq_plugins.decoding.registry import DECODERS, option_fields

    if spec.decoding != "beam" and not hasattr(task.cfg, "decoding"):
        raise PluginError(f"decoder {spec.label!r} needs --task speculative_translation, not --task {task.cfg._name}")
    if hasattr(task.cfg, "decoding"):
        task.cfg.decoding = spec.decoding
    own = set(DECODERS[spec.decoding].option_names()) if spec.decoding in DECODERS else set()
    for name, f in option_fields().items():
        if name in base:
            setattr(task.cfg, name, base[name] if name in own else f.default)
    if drafter_path and _needs_drafter(spec.decoding):
        task.cfg.drafter_path = drafter_path
    for name, value in spec.options.items():
        setattr(task.cfg, name, value)
    generation.beam = spec.beam if spec.decoding == "beam" else 1


def task_defaults(task) -> Dict[str, object]:
    """The task fields ``configure`` changes, as loaded (command-line values kept); none for
    a task without the speculative decoders (``beamN`` specs only)."""
    from fairseq_plugins.decoding.registry import option_fields

    from fairseq_plugins.decoding.registry import config_value

    missing = object()
    values = {name: config_value(task.cfg, name, missing) for name in option_fields()}
    return {name: value for name, value in values.items() if value is not missing}
