"""Latency benchmark: every decoder side by side on one verifier and one test set.

    python -m fairseq_plugins.bench.latency DATA --path verifier.pt --drafter-path drafter.pt \\
        --decoders beam1,greedy,beam5,specdec,specdec++,specdec++:beta=5,tau=3,iad,gs-jacobi \\
        --remove-bpe --out-md latency.md --out-png latency.png --out-json latency.json

The verifier and the test set are loaded once under ``--task speculative_translation``;
each decoder's generator is built through ``task.build_generator`` (``beamN`` is fairseq's
own SequenceGenerator with ``--beam N``).  Sentences are decoded at batch size 1 by
default (``--batch-sizes 1,8`` sweeps), after ``--warmup`` untimed sentences, on one
device with a fixed CPU thread count.  The rows take turns (``--rounds``, ``bench.rounds``):
every row decodes one interleaved chunk of the sentences per round, so that a machine whose
speed drifts slows every row alike; the report gives the range of the per-round speedups.  Reported per decoder: median and p90 latency per
sentence (the wall time of the batch it is decoded in; CUDA synchronised), total time,
speedups vs fairseq's greedy search (``beam1``), vs the plugin's ``greedy`` decoder (the lean
verifier every plugin decoder runs, nothing drafted: the speedup drafting itself brings) and vs
beam-5 (ratios of median latencies and of total times), iterations per sentence and tokens
accepted per iteration, sacreBLEU of the detokenized output (``--score jfleg`` / ``conll2013``: the GLEU
or edit F0.5 of a GEC test set instead, ``bench.task_score``), the number of sentences whose
output differs from ``beam1``'s and from ``greedy``'s, and the arithmetic of the row's matrix
products (``bench.arithmetic``).  With the ``ctranslate2`` package installed, CTranslate2
greedy and beam-5 rows are added, one pair per compute type (``--ct2-compute-types``).

Two reference rows replay ``beam1``'s greedy outputs (``bench.oracle``): ``oracle``
(``oracle:k=10``), the speculative core with a drafter that always drafts the greedy
continuation, and ``bound``, the encoder plus one teacher-forced pass of the lean verifier
over the whole output per batch; both take the verifier's products as the decoders do
(``oracle:verifier_matmul=int8``).  ``--out-md FILE --md-section NAME`` writes the table into
the marked section NAME of FILE (e.g. docs/benchmarks.md), keeping the rest of the file.
``--profile`` splits one iteration of every speculative row into encoder / drafter /
verifier / accept, in greedy steps (``bench.profile``).  ``--model NAME=CHECKPOINT`` loads
another model of the same data for the rows that name it (``iad:model=NAME``): timed against
``--path``'s baselines, compared output for output with its own ``beam1:model=NAME`` and
``greedy:model=NAME`` rows (a 12+2 GEC model against a 6+6's greedy search).

Any other option is passed on to fairseq-generate's parser (``--source-lang``,
``--max-len-a``/``--max-len-b``, ``--lenpen``, ``--tokenizer moses``...) and applies to every
row: fairseq's beam rows, the plugin's decoders and ``oracle``.
"""
import argparse
import contextlib
import sys
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, List, Optional, Tuple

from fairseq_plugins_compat.errors import PluginError, exit_on_plugin_error

from fairseq_plugins.bench import ct2, rounds, task_score
from fairseq_plugins.bench.decoders import default_decoders, missing_inputs, parse_decoders

EPILOG = ("Other options go to fairseq-generate's parser and apply to every row, e.g. --max-len-a A --max-len-b B "
          "(the output length cap, as fairseq-generate: at most A * source length + B tokens), --lenpen, "
          "--source-lang; the decoders' own options (--block-size, --beta, --tau, --hybrid-length...) apply to "
          "every decoder unless a spec sets them (name:key=value).  oracle, bound and --profile need beam1 in "
          "--decoders (it runs first).")


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m fairseq_plugins.bench.latency", description=__doc__.split("\n\n")[0],
        epilog=EPILOG, formatter_class=argparse.ArgumentDefaultsHelpFormatter, allow_abbrev=False)
    add = parser.add_argument
    add("data", help="binarized data directory (fairseq-preprocess output) with the test split")
    add("--path", required=True, help="verifier checkpoint (a fairseq autoregressive model)")
    add("--drafter-path", help="block NAT drafter checkpoint (specdec, specdec++, drafter-only)")
    add("--model", action="append", default=[], metavar="NAME=CHECKPOINT",
        help="another model of the same data (its dictionaries), decoded by the rows that name it, e.g. "
             "--model 12x2=deep.pt --decoders beam1,greedy,iad,beam1:model=12x2,iad:model=12x2 (repeat the option "
             "for more). Its rows' speedups are against this run's beam1, greedy and beam5 (of --path); their "
             "≠ beam1 / ≠ greedy against its own beam1:model=NAME / greedy:model=NAME rows, when listed")
    add("--decoders", default=default_decoders(),
        help="comma-separated specs: beamN (fairseq's search), or a --decoding name, optionally with "
             "options, e.g. specdec++:beta=5,tau=3 or gs-jacobi:block=4; oracle[:k=10] (the core with a drafter "
             "drafting the greedy output) and bound (encoder + one teacher-forced verifier pass) replay beam1; "
             "both take verifier_matmul=... (oracle:verifier_matmul=int8: the ceiling of drafting on int8 products)")
    add("--batch-sizes", default="1", help="comma-separated batch sizes to sweep (1: latency setting)")
    add("--profile", action="store_true",
        help="one extra untimed pass per speculative row (plugin decoders, oracle) timing its parts: the cost of "
             "one iteration as encoder (amortised) / drafter / verifier / accept, in greedy steps (needs beam1)")
    add_shared_options(add, threads_help="CPU threads for torch (torch.set_num_threads) and CTranslate2")
    add("--no-ctranslate2", action="store_true", help="no CTranslate2 rows even if the package is installed")
    add("--ct2-dir", help="keep (and reuse) the CTranslate2 conversion here; None: a temporary folder")
    add("--score", choices=task_score.SCORES, default="bleu",
        help="the table's score column: sacreBLEU against the split's target (bleu), or a GEC test set's own score "
             "by fairseq_plugins.scripts.gec_score on the detokenized outputs: GLEU against the 4 JFLEG dev "
             "references (jfleg; the split must be JFLEG dev) or edit F0.5 against the CoNLL-2013 gold edits "
             "(conll2013; the split must be CoNLL-2013)")
    add("--score-data-dir", help="folder holding jfleg/dev/dev.{src,ref0..3} and "
                                 "conll2013/revised/official-preprocessed.m2 (--score jfleg, conll2013); default: "
                                 "GEC_DATA_DIR, else ../shared/data beside the repository")
    add("--ct2-compute-types", default="auto",
        help="CTranslate2 compute types, a greedy and a beam-5 row each, e.g. float32,int8; auto: float32 (float16 "
             "with --fp16), int8, int16 and bfloat16, those this CTranslate2 build supports on the device")
    return parser


def add_shared_options(add, threads_help: str = "CPU threads for torch (torch.set_num_threads)"):
    """Options of every timing harness (this one and ``bench.systems``): split, sentences,
    warm-up, rounds, device, threads, BPE removal, outputs, progress bar."""
    add("--gen-subset", default="test", help="split to decode")
    add("--max-sentences", type=int, default=0, help="decode only the first N sentences (0: all)")
    add("--warmup", type=int, default=10, help="untimed sentences decoded by each row before timing it (and, when "
                                               "> 0, one untimed batch before each later round's chunk)")
    add("--rounds", type=int, default=10,
        help="the rows take turns: the sentences are cut into this many interleaved chunks and every row decodes "
             "chunk r in round r, so that a machine whose speed drifts during the run slows every row alike "
             "(1: each row decodes everything before the next starts)")
    add("--device", choices=["cpu", "cuda"], default="cpu", help="where to decode")
    add("--fp16", action="store_true", help="half precision (CUDA only)")
    add("--threads", type=int, default=1, help=threads_help)
    add("--post-process", "--remove-bpe", nargs="?", const="subword_nmt", default=None,
        help="remove BPE before BLEU, as fairseq: subword_nmt (@@ ), sentencepiece, ...")
    add("--out-md", help="markdown table (with the hardware) to write")
    add("--md-section", metavar="NAME",
        help="write the table into --out-md between the lines <!-- bench:NAME --> and <!-- /bench:NAME --> "
             "(added at the end of the file when absent), keeping the rest of the file")
    add("--out-png", help="PNG plot to write")
    add("--out-json", help="JSON with all numbers to write")
    add("--no-progress-bar", action="store_true", help="no tqdm progress bar")


def parse_args(argv=None) -> Tuple[argparse.Namespace, List[str]]:
    """The harness's options and the rest (for fairseq's parser)."""
    args, extra = get_parser().parse_known_args(argv)
    try:
        args.batch_sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
    except ValueError:
        raise PluginError(f"--batch-sizes: expected comma-separated integers, got {args.batch_sizes!r}")
    check_args(args)
    return args, extra


def check_args(args):
    """Every problem with the options at once."""
    from fairseq_plugins.decoding.registry import decoder_names

    problems = shared_problems(args) + score_problems(args) + ct2.compute_type_problems(args.ct2_compute_types)
    if not args.batch_sizes or min(args.batch_sizes) < 1:
        problems.append("--batch-sizes must be positive integers")
    specs = parse_decoders(args.decoders, decoder_names())
    problems += decoder_problems(specs, args.profile) + model_problems(args, specs)
    if problems:
        raise PluginError("; ".join(problems))


def parse_pairs(option: str, items: List[str], right: str) -> List[Tuple[str, str]]:
    """``["a=x", "b=y"]`` -> ``[("a", "x"), ("b", "y")]``; ``option`` and ``right`` name them in errors."""
    pairs = []
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name.strip() or not value.strip():
            raise PluginError(f"{option}: expected NAME={right}, got {item!r}")
        pairs.append((name.strip(), value.strip()))
    return pairs


def model_problems(args, specs) -> List[str]:
    """What is wrong with --model (sets ``args.models``: name -> checkpoint) and the rows naming a model."""
    import os

    problems, args.models = [], {}
    for item in args.model:
        try:
            [(name, path)] = parse_pairs("--model", [item], "CHECKPOINT")
        except PluginError as error:
            problems.append(str(error))
            continue
        if name in args.models:
            problems.append(f"--model: the name {name!r} is given twice")
        elif not os.path.isfile(path):
            problems.append(f"--model {name}: no such file: {path}")
        args.models.setdefault(name, path)
    unknown = [spec.label for spec in specs if spec.model is not None and spec.model not in args.models]
    if unknown:
        problems.append(f"{', '.join(unknown)}: no such --model name (given: {', '.join(args.models) or 'none'})")
    return problems


def score_problems(args) -> List[str]:
    """--score's reference files, when missing (empty: none missing)."""
    problem = task_score.reference_problem(args.score, task_score.data_dir(args.score_data_dir))
    return [problem] if problem else []


def decoder_problems(specs, profile: bool) -> List[str]:
    """What is wrong with combining these decoder specs (and ``--profile``)."""
    has_greedy = any(spec.is_greedy for spec in specs)
    replaying = [spec.label for spec in specs if spec.replays_greedy]
    problems = []
    if replaying and not has_greedy:
        problems.append(f"{', '.join(replaying)}: need beam1 in --decoders (they replay its greedy outputs)")
    if profile and not has_greedy:
        problems.append("--profile needs beam1 in --decoders (costs are in greedy-step units)")
    if profile and not any(profiled(spec) for spec in specs):
        problems.append("--profile: no decoder in --decoders has iterations to profile (beamN, bound and "
                        "CTranslate2 rows are not profiled; add a speculative decoder or oracle)")
    return problems


def profiled(spec) -> bool:
    """Rows of the speculative core (the plugin's decoders, oracle) are profiled."""
    from fairseq_plugins.decoding.registry import DECODERS

    return spec.decoding in DECODERS or spec.decoding == "oracle"


def shared_problems(args) -> List[str]:
    """What is wrong with the options of ``add_shared_options`` (empty: nothing)."""
    import torch

    from fairseq_plugins.bench import report

    checks = [
        (args.fp16 and args.device != "cuda", "--fp16 needs --device cuda"),
        (args.device == "cuda" and not torch.cuda.is_available(), "--device cuda: no CUDA device is available"),
        (args.threads < 1, f"--threads must be >= 1, got {args.threads}"),
        (args.warmup < 0 or args.max_sentences < 0, "--warmup and --max-sentences must be >= 0"),
        (args.rounds < 1, f"--rounds must be >= 1, got {args.rounds}"),
        (args.md_section is not None and not args.out_md, "--md-section needs --out-md (the file to write it into)"),
        (args.md_section is not None and not report.SECTION_NAME.fullmatch(args.md_section),
         f"--md-section: letters, digits, '.', '_' and '-' only, got {args.md_section!r}"),
    ]
    return [message for bad, message in checks if bad]


def say(message: str):
    print(f"[latency] {message}", file=sys.stderr, flush=True)


def progress_bar(args, total: int, desc: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="sent", disable=args.no_progress_bar, file=sys.stderr,
                dynamic_ncols=True)


@dataclass
class HarnessRun:
    """What the rows share (engine, batches, references) and what they found."""

    args: argparse.Namespace
    engine: object  # fairseq_engine.FairseqEngine of --path
    batches_by_size: Dict[int, list]
    ids: List[int]
    refs: object  # sentence id -> detokenized reference, or None
    rows: List[dict] = field(default_factory=list)
    outputs: Dict[tuple, dict] = field(default_factory=dict)  # row key -> id -> output symbols
    skipped: List[dict] = field(default_factory=list)
    greedy: Dict[int, dict] = field(default_factory=dict)  # batch size -> id -> beam1's output token ids
    generators: list = field(default_factory=list)  # (spec, generator, row template) of the plugin/oracle rows
    passes: list = field(default_factory=list)  # profile.ProfilePass of each profiled row and batch size
    ctranslate2: dict = field(default_factory=dict)  # CTranslate2 rows: status, version or reason
    # row key -> its "arithmetic" cell, read after timing (bench.arithmetic: what the row's products ran)
    arithmetic: Dict[tuple, Callable[[], Optional[str]]] = field(default_factory=dict)
    score: object = None  # task_score.TaskScore of --score jfleg / conll2013; None: BLEU
    others: Dict[str, object] = field(default_factory=dict)  # --model NAME -> its engine (same data)

    def engine_of(self, spec):
        """The engine a row decodes with: --path's, or the other model the spec names."""
        return self.engine if spec.model is None else self.others[spec.model]

    def skip(self, label, reason):
        say(f"skipping {label}: {reason}")
        self.skipped.append({"decoder": label, "reason": reason})


def fairseq_rows(harness: HarnessRun, specs) -> List[rounds.Row]:
    """Row templates (no batches yet) of every plugin/fairseq decoder, beam1 first (oracle,
    bound and --profile use its outputs and time); ones whose inputs are missing are skipped."""
    templates = []
    for spec in sorted(specs, key=lambda s: not s.is_greedy):
        row = bound_row(harness, spec) if spec.decoding == "bound" else generator_row(harness, spec)
        if row is not None:
            templates.append(row)
    return templates


def generator_row(harness: HarnessRun, spec) -> Optional[rounds.Row]:
    """The row of a generator (the oracle's replays beam1: its drafter gets the greedy outputs)."""
    from fairseq_plugins.bench import arithmetic, oracle

    args, engine = harness.args, harness.engine_of(spec)
    reason = missing_inputs(spec, args.drafter_path)
    if reason is None:
        try:
            if spec.decoding == "oracle":
                generator, drafter = oracle.build_oracle(engine, spec)
            else:
                generator, drafter = engine.build_generator(spec, args.drafter_path), None
        except (PluginError, FileNotFoundError, OSError) as error:
            reason = f"cannot build the generator: {error}"
    if reason is not None:
        harness.skip(spec.label, reason)
        return None
    run, convert = engine.runner(generator), engine.outputs(spec)

    def replay(batches, greedy):
        drafter.targets = oracle.oracle_targets(engine, greedy)
        return batches, convert

    row = rounds.Row(spec.label, "fairseq", run, convert, [], is_greedy=spec.is_greedy,
                     replay=replay if drafter is not None else None)
    harness.generators.append((spec, generator, row))
    model = engine.models[0]
    harness.arithmetic[row.key] = ((lambda: arithmetic.dtype_name(model)) if spec.decoding == "beam" else
                                   (lambda: arithmetic.generator_arithmetic(generator, model)))
    return row


def bound_row(harness: HarnessRun, spec) -> Optional[rounds.Row]:
    """The ``bound`` row: encoder + one teacher-forced pass of the lean verifier over beam1's output."""
    from fairseq_plugins.bench import arithmetic, oracle

    try:
        bound = oracle.TeacherForcedBound(harness.engine, spec.options)
    except PluginError as error:
        harness.skip(spec.label, str(error))
        return None
    row = rounds.Row(spec.label, "fairseq", bound.runner(), None, [],
                     replay=lambda batches, greedy: (bound.batches(batches, greedy), bound.outputs(greedy)))
    model = harness.engine.models[0]
    harness.arithmetic[row.key] = lambda: arithmetic.products(bound.generator.verifier_linear, model)
    return row


@contextlib.contextmanager
def ctranslate2_rows(harness: HarnessRun):
    """CTranslate2 greedy and beam-5 row templates, a pair per compute type (greedy rows first), usable
    inside the ``with`` (the converted model's folder lives that long); none when skipped, the reason in
    ``harness.ctranslate2``."""

    args, engine = harness.args, harness.engine
    module, reason = (None, "--no-ctranslate2") if args.no_ctranslate2 else ct2.import_ctranslate2()
    if module is None:
        say(f"CTranslate2 rows skipped: {reason}")
        harness.ctranslate2 = {"status": "skipped", "reason": reason}
        yield []
        return
    workspace = ct2.Workspace(args.ct2_dir)
    try:
        try:
            model_dir = ct2.convert(module, engine, args.path, workspace.path)
            types, unsupported = ct2.compute_types(module, args.ct2_compute_types, args.device, args.fp16)
            symbols = ct2.sources(engine, next(iter(harness.batches_by_size.values())))
            max_positions = engine.models[0].max_decoder_positions()
            templates = []
            for compute_type in types:
                translator = ct2.make_translator(module, model_dir, args.device, args.threads, compute_type)
                for label, beam in ct2.BEAMS:
                    row = rounds.Row(f"{label} {compute_type}", "ctranslate2",
                                     ct2.runner(translator, symbols, beam, engine.cfg.generation, max_positions),
                                     ct2.outputs(beam), [], optional=True)
                    harness.arithmetic[row.key] = lambda name=compute_type: name
                    templates.append(row)
            templates.sort(key=lambda row: not row.label.startswith("beam1 "))  # the greedy rows first
            harness.ctranslate2 = {"status": "ok", "version": getattr(module, "__version__", None),
                                   "compute_types": types}
            if unsupported:
                say(f"CTranslate2 compute types not supported on {args.device} by this build: {', '.join(unsupported)}")
                harness.ctranslate2["unsupported"] = unsupported
        except Exception as error:  # conversion problems of an optional third-party engine
            say(f"CTranslate2 rows skipped: {ct2.reason(error)}")
            harness.ctranslate2 = {"status": "skipped", "reason": ct2.reason(error)}
            templates = []
        yield templates
    finally:
        workspace.close()


def time_rows(harness: HarnessRun, templates: List[rounds.Row]):
    """Time every row at every batch size, the rows taking turns (``bench.rounds``); one
    summary row per template and batch size, in template order."""
    from fairseq_plugins.bench import summary, timing

    args = harness.args

    def dropped(row, error):
        say(f"CTranslate2 {row.label} row dropped: {ct2.reason(error)}")
        harness.ctranslate2 = {"status": "skipped", "reason": f"{row.label}: {ct2.reason(error)}"}

    found, models = {}, {row.key: spec.model for spec, _, row in harness.generators}
    for bs, batches in harness.batches_by_size.items():
        rows = [replace(template, batches=batches) for template in templates]
        with progress_bar(args, len(harness.ids) * len(rows), f"batch {bs}") as bar:
            timed = rounds.time_in_rounds(rows, args.rounds, args.warmup, args.device, bar, dropped)
        for row in rows:
            if row.key not in timed:
                continue
            results = timed[row.key].results
            found[row.key, bs] = summary.summarize(row.label, row.engine_name, bs, results,
                                                   timing.batch_times(results, batches), harness.engine.detokenize,
                                                   harness.refs, harness.score and harness.score.score)
            found[row.key, bs]["round_s"] = timed[row.key].round_s
            found[row.key, bs]["arithmetic"] = harness.arithmetic[row.key]() if row.key in harness.arithmetic else None
            found[row.key, bs]["model"] = models.get(row.key)  # the --model NAME it decodes with; None: --path
            harness.outputs[row.label, row.engine_name, bs] = {i: r.output.symbols for i, r in results.items()}
            if row.is_greedy:
                harness.greedy[bs] = {i: r.output.tokens for i, r in results.items()}
    harness.rows += [found[t.key, bs] for t in templates for bs in harness.batches_by_size if (t.key, bs) in found]


def profile_rows(harness: HarnessRun):
    """--profile: one extra untimed pass per speculative row and batch size (``bench.profile``)."""
    from fairseq_plugins.bench import profile

    args = harness.args
    for spec, generator, row in harness.generators:
        if not profile.can_profile(generator):
            if profiled(spec):
                say(f"--profile: {spec.label} is not profiled (its generator is not the speculative core)")
            continue
        for bs, batches in harness.batches_by_size.items():
            batches, _ = rounds.prepare(row, batches, harness.greedy[bs])  # the oracle's targets
            harness.passes.append(profile.profile_pass(spec.label, bs, generator, row.run, batches, args.device))


def benchmark(args, extra) -> dict:
    """Load once, time every decoder, compare; the result behind all outputs."""
    import torch

    from fairseq_plugins.bench import fairseq_engine, profile, summary
    from fairseq_plugins.decoding.registry import decoder_names

    torch.set_num_threads(args.threads)
    specs = parse_decoders(args.decoders, decoder_names())
    cfg = fairseq_engine.fairseq_config(args.data, args.path, args.gen_subset, args.device, args.fp16,
                                        args.post_process, extra)
    engine = fairseq_engine.FairseqEngine(cfg, args.device, args.fp16)
    ids, too_long = engine.sentence_ids(args.max_sentences)
    if too_long:
        say(f"{len(too_long)} sentences longer than the models' max source positions are not decoded: {too_long[:10]}")
    if not ids:
        raise PluginError(f"{args.data}: no sentence of the {args.gen_subset} split to decode")
    batches_by_size = {bs: engine.batches(ids, bs) for bs in args.batch_sizes}
    score_dir = task_score.data_dir(args.score_data_dir)
    score = task_score.load(args.score, score_dir, len(engine.dataset), args.gen_subset)
    others = {name: fairseq_engine.FairseqEngine(fairseq_engine.config_for_path(cfg, path), args.device, args.fp16)
              for name, path in args.models.items()}
    harness = HarnessRun(args, engine, batches_by_size, ids, engine.references(ids), score=score, others=others)
    templates = fairseq_rows(harness, specs)
    if specs and not templates:  # timing CTranslate2's rows alone is not what was asked for
        raise PluginError("nothing to time: " + "; ".join(f"{s['decoder']} {s['reason']}" for s in harness.skipped))
    with ctranslate2_rows(harness) as ct2_templates:
        time_rows(harness, templates + ct2_templates)
    order = {spec.label: n for n, spec in enumerate(specs)}  # --decoders order (beam1 ran first), CTranslate2 last
    harness.rows.sort(key=lambda row: (row["engine"] != "fairseq", order.get(row["decoder"], 0)))
    if args.profile:
        profile_rows(harness)
    rows = harness.rows
    summary.add_comparisons(rows, harness.outputs)
    hardware = {**fairseq_engine.hardware(args.device, args.threads), "fp16": args.fp16}
    settings = {"data": args.data, "path": args.path, "models": args.models, "drafter_path": args.drafter_path,
                "gen_subset": args.gen_subset,
                "sentences": len(ids), "too_long": too_long, "warmup": args.warmup, "batch_sizes": args.batch_sizes,
                "rounds": {str(bs): len(rounds.interleaved_chunks(b, args.rounds)) for bs, b in batches_by_size.items()},
                "decoders": [s.label for s in specs], "post_process": args.post_process, "fairseq_args": extra,
                "profile": args.profile, "ct2_compute_types": args.ct2_compute_types, "score": args.score,
                "score_data_dir": str(score_dir) if score is not None else None}
    found_profile = (profile.summarize_all(harness.passes, rows, batches_by_size, summary.GREEDY)
                     if args.profile else None)
    return {"hardware": hardware, "settings": settings, "rows": rows, "skipped": harness.skipped,
            "ctranslate2": harness.ctranslate2, "profile": found_profile}


def main(argv=None) -> dict:
    from fairseq_plugins.bench import report

    args, extra = parse_args(argv)
    result = benchmark(args, extra)
    for path in report.write_all(result, args.out_md, args.out_png, args.out_json, md_section=args.md_section):
        say(f"wrote {path}")
    print(report.markdown(result), end="")
    return result


def cli_main():
    exit_on_plugin_error(main, "latency")


if __name__ == "__main__":
    cli_main()
