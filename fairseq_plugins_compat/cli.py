"""Shims for fairseq 0.12.2's console scripts: ``--help``, generate and interactive.

* ``--help`` lists the options of the chosen ``--task``/``--arch`` (fairseq parses it
  before adding them), without a usage error about missing positional arguments and
  without fairseq-generate's placeholder ``--arch wav2vec2`` options;
* the input checks of ``fairseq-generate``/``fairseq-interactive`` (bare ``assert``
  statements), ``--sampling`` with a plugin ``--decoding``, a missing or unreadable
  ``--sentencepiece-model`` and a ``--gen-subset`` the data folder lacks are one-line errors;
* a failed ``fairseq-generate --results-path`` run leaves no empty ``generate-*.txt``;
* ``fairseq-interactive`` reports an over-long input line and goes on with the next
  ones (fairseq stopped reading input there).
"""
import argparse
import contextlib
import os
import sys
import traceback

from fairseq_plugins_compat.errors import PluginError
from fairseq_plugins_compat.patches import is_fairseq_0_12

HELP_FLAGS = ("-h", "--help")
ARCH_FLAGS = ("--arch", "-a")


def _program_name():
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "fairseq"


# -- --help ----------------------------------------------------------------------------------

class _ParseFailed(Exception):
    pass


def _raise_parse_failed(message):
    raise _ParseFailed(message)


def _gives_arch(args):
    return any(a in ARCH_FLAGS or a.startswith("--arch=") for a in args)


@contextlib.contextmanager
def _parser_errors(parser, handler):
    """``parser.error`` replaced by ``handler(message)`` for a while, then as it was."""
    previous = parser.__dict__.get("error")
    parser.error = handler
    try:
        yield
    finally:
        if previous is None:
            del parser.error
        else:
            parser.error = previous


@contextlib.contextmanager
def _lenient_parser(parser, args):
    """While fairseq completes the parser for ``--help``: no argument is required, parse
    errors are silent, and an ``--arch`` default (generate's ``wav2vec2``) adds no options."""
    required = [(action, action.required) for action in parser._actions]
    arch = parser._option_string_actions.get("--arch")
    arch_default = arch.default if arch is not None else None
    for action, _ in required:
        action.required = False
    if arch is not None and not _gives_arch(args):
        arch.default = argparse.SUPPRESS
    try:
        with _parser_errors(parser, _raise_parse_failed):
            yield
    finally:
        for action, was_required in required:
            action.required = was_required
        if arch is not None:
            arch.default = arch_default


def _tasks_defining(flag):
    """The registered tasks whose options include ``flag`` (``--decoding`` -> ``speculative_translation``)."""
    from fairseq.tasks import TASK_DATACLASS_REGISTRY

    name = flag.split("=", 1)[0][2:].replace("-", "_")
    return sorted(task for task, config in TASK_DATACLASS_REGISTRY.items()
                  if config is not None and name in getattr(config, "__dataclass_fields__", {}))


def _plugin_loaded_for_hint():
    """Import the plugin (it registers its tasks) when ``--user-dir`` did not; its folder, or None when
    it was already loaded (or cannot be)."""
    if "fairseq_plugins" in sys.modules:
        return None
    try:
        import fairseq_plugins
    except Exception:  # no hint is better than a traceback inside an error message
        return None
    return os.path.dirname(fairseq_plugins.__file__)


def task_option_hint(message):
    """argparse's ``unrecognized arguments: --decoding specdec`` plus which ``--task`` (and, when it
    was not given, which ``--user-dir``) has the option: the plugin's options exist only under its
    tasks, and the default task is ``translation``."""
    if not message.startswith("unrecognized arguments:"):
        return message
    flags = [a.split("=", 1)[0] for a in message.split(":", 1)[1].split() if a.startswith("--")]
    user_dir = _plugin_loaded_for_hint() if flags else None
    flags_by_tasks = {}
    for flag in flags:
        tasks = _tasks_defining(flag)
        if tasks:
            flags_by_tasks.setdefault(" / ".join(tasks), []).append(flag)
    needs = f"--user-dir {user_dir} --task" if user_dir else "--task"
    hints = [f"{', '.join(named)}: {'options' if len(named) > 1 else 'an option'} of {needs} {tasks}"
             for tasks, named in flags_by_tasks.items()]
    return f"{message} ({'; '.join(hints)})" if hints else message


def patch_options(module):
    """fairseq parses ``--help`` before it adds the options of ``--task``, ``--arch``,
    ``--criterion``...: their options never appear.  Parse without it, then print the
    help of the completed parser."""
    if not is_fairseq_0_12():
        return
    original = module.parse_args_and_arch

    def parse_args_and_arch(parser, input_args=None, parse_known=False, suppress_defaults=False, modify_parser=None):
        args = sys.argv[1:] if input_args is None else list(input_args)
        if not any(a in HELP_FLAGS for a in args):
            report = parser.error
            with _parser_errors(parser, lambda message: report(task_option_hint(message))):
                return original(parser, input_args, parse_known, suppress_defaults, modify_parser)
        args = [a for a in args if a not in HELP_FLAGS]
        with _lenient_parser(parser, args):
            try:
                original(parser, args, True, suppress_defaults, modify_parser)
            except Exception:  # e.g. an unknown --task: show what we have
                pass
        parser.print_help()
        sys.exit(0)

    module.parse_args_and_arch = parse_args_and_arch


# -- generate / interactive: input checks ----------------------------------------------------

def _as_config(cfg):
    if isinstance(cfg, argparse.Namespace):
        from fairseq.dataclass.utils import convert_namespace_to_omegaconf

        return convert_namespace_to_omegaconf(cfg)
    return cfg


def _plugin_decoding(cfg):
    """The plugin task's ``--decoding`` other than fairseq's own beam search, or None."""
    task = cfg.get("task") if hasattr(cfg, "get") else None
    decoding = task.get("decoding", None) if task is not None and hasattr(task, "get") else None
    return None if decoding in (None, "beam") else str(decoding)


def check_sampling(cfg):
    """fairseq asserts ``--nbest == --beam`` for ``--sampling`` before any decoder is built;
    with a plugin ``--decoding``, say what the decoder would say about sampling instead."""
    gen, decoding = cfg.generation, _plugin_decoding(cfg)
    if not gen.sampling or gen.nbest == gen.beam or decoding is None:
        return
    options = sys.modules.get("fairseq_plugins.decoding.options")
    if options is not None and hasattr(options, "check_generation_args"):
        options.check_generation_args(gen, decoding)
    raise PluginError(f"--decoding {decoding} does not support: sampling (use --decoding beam)")


def check_sentencepiece(cfg):
    """fairseq opens ``--sentencepiece-model`` deep in its BPE registry, with a traceback for a missing or
    unreadable file: one line here, before any model is loaded."""
    bpe = cfg.get("bpe") if hasattr(cfg, "get") else None
    if bpe is None or not hasattr(bpe, "get") or bpe.get("_name") != "sentencepiece":
        return
    from omegaconf import OmegaConf

    if OmegaConf.is_missing(bpe, "sentencepiece_model"):
        raise PluginError("--bpe sentencepiece needs --sentencepiece-model")
    path = bpe.get("sentencepiece_model")
    if not path or not os.path.isfile(path):
        raise PluginError(f"--sentencepiece-model not found: {path}")
    load_sentencepiece(path, "--sentencepiece-model")


def load_sentencepiece(path: str, what: str = "sentencepiece model"):
    """The sentencepiece model at ``path``; a file sentencepiece cannot parse is a PluginError naming it
    (as ``what``)."""
    import sentencepiece

    try:
        return sentencepiece.SentencePieceProcessor(model_file=path)
    except (RuntimeError, OSError) as error:
        raise PluginError(f"{what} {path} is not readable: {str(error).strip()}") from None


@contextlib.contextmanager
def assertions_as_errors(module):
    """The ``assert`` statements in ``module.main`` check user input: one line each."""
    try:
        yield
    except AssertionError as error:
        frames = traceback.extract_tb(error.__traceback__)
        if str(error) and frames and frames[-1].filename == module.__file__ and frames[-1].name == "main":
            raise PluginError(str(error)) from None
        raise


@contextlib.contextmanager
def missing_split_as_error(split: str):
    """fairseq's translation tasks raise ``FileNotFoundError("Dataset not found: SPLIT (DATA)")`` for a
    ``--gen-subset`` the data folder does not have: one line, the same in every command."""
    try:
        yield
    except FileNotFoundError as error:
        if str(error).startswith("Dataset not found"):
            raise PluginError(f"--gen-subset {split}: {error}") from None
        raise


def _results_file(cfg):
    results_path = cfg.common_eval.results_path
    if results_path is None:
        return None
    return os.path.join(results_path, f"generate-{cfg.dataset.gen_subset}.txt")


@contextlib.contextmanager
def removed_on_failure(path):
    """Delete ``path`` (and its folder, if this run created it empty) when the body fails."""
    folder = os.path.dirname(path) if path else None
    folder_existed = folder is None or os.path.isdir(folder)
    try:
        yield
    except BaseException as error:
        if path and not (isinstance(error, SystemExit) and error.code in (0, None)):
            with contextlib.suppress(OSError):
                os.remove(path)
            if not folder_existed:
                with contextlib.suppress(OSError):
                    os.rmdir(folder)
        raise


def patch_generate(module):
    if not is_fairseq_0_12():
        return
    original = module.main

    def main(cfg):
        cfg = _as_config(cfg)
        with removed_on_failure(_results_file(cfg)), assertions_as_errors(module), \
                missing_split_as_error(cfg.dataset.gen_subset):
            check_sampling(cfg)
            check_sentencepiece(cfg)
            return original(cfg)

    main.__doc__ = original.__doc__
    module.main = main


# -- interactive: over-long lines ------------------------------------------------------------

def max_source_tokens(max_positions):
    """The source limit in fairseq's resolved ``max_positions`` (None: no single limit)."""
    if isinstance(max_positions, (tuple, list)) and max_positions:
        max_positions = max_positions[0]
    return int(max_positions) if isinstance(max_positions, (int, float)) else None


def _source_text(line, cfg):
    return line.split("\t")[0] if cfg.generation.constraints else line


def _over_long(lines, cfg, task, limit, encode_fn):
    """{index in ``lines``: number of tokens} of the lines longer than ``limit``."""
    if limit is None:
        return {}
    _tokens, lengths = task.get_interactive_tokens_and_lengths([_source_text(l, cfg) for l in lines], encode_fn)
    return {i: int(n) for i, n in enumerate(lengths) if n > limit}


def _skipping_over_long_lines(original):
    """``make_batches`` that reports each over-long line on stderr and batches the others
    (their ids stay the positions in the buffer, as ``main`` expects)."""
    lines_before = [0]  # lines of the earlier buffers: main's start_id

    def make_batches(lines, cfg, task, max_positions, encode_fn):
        start, lines_before[0] = lines_before[0], lines_before[0] + len(lines)
        limit = max_source_tokens(max_positions)
        too_long = _over_long(lines, cfg, task, limit, encode_fn)
        for i, n_tokens in too_long.items():
            print(f"{_program_name()}: line {start + i + 1} skipped: {n_tokens} tokens, more than the "
                  f"{limit} source tokens the model takes", file=sys.stderr, flush=True)
        kept = [i for i in range(len(lines)) if i not in too_long]
        if not kept:
            return
        import torch

        for batch in original([lines[i] for i in kept], cfg, task, max_positions, encode_fn):
            yield batch._replace(ids=torch.tensor([kept[int(i)] for i in batch.ids]))

    return make_batches


def patch_interactive(module):
    if not is_fairseq_0_12():
        return
    original = module.main

    def main(cfg):
        cfg = _as_config(cfg)
        with assertions_as_errors(module):
            check_sampling(cfg)
            check_sentencepiece(cfg)
            return original(cfg)

    main.__doc__ = original.__doc__
    module.main = main
    module.make_batches = _skipping_over_long_lines(module.make_batches)
