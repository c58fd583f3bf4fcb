"""Latency benchmark: every decoder side by side on one verifier and one test set.

    python -m fairseq_plugins.bench.latency DATA --path verifier.pt --drafter-path drafter.pt \\
        --decoders beam1,beam5,specdec,specdec++,specdec++:beta=5,tau=3,iad,gs-jacobi \\
        --remove-bpe --out-md latency.md --out-png latency.png --out-json latency.json

The verifier and the test set are loaded once under ``--task speculative_translation``;
each decoder's generator is built through ``task.build_generator`` (``beamN`` is fairseq's
own SequenceGenerator with ``--beam N``).  Sentences are decoded at batch size 1 by
default (``--batch-sizes 1,8`` sweeps), after ``--warmup`` untimed sentences, on one
device with a fixed CPU thread count.  Reported per decoder: median and p90 latency per
sentence (the wall time of the batch it is decoded in; CUDA synchronised), total time,
speedups vs greedy (``beam1``) and beam-5 (ratios of median latencies and of total times),
iterations per sentence and tokens accepted per iteration, sacreBLEU of the detokenized
output, and the number of sentences whose output differs from greedy's.  With the
``ctranslate2`` package installed, CTranslate2 greedy and beam-5 rows are added.
Any other option is passed on to fairseq-generate's parser (``--source-lang``,
``--max-len-b``, ``--lenpen``, ``--tokenizer moses``, ``--iad-match-length``...).
"""
import argparse
import sys
from typing import Dict, List, Tuple

from fairseq_plugins_compat.errors import PluginError

from fairseq_plugins.bench.decoders import default_decoders, missing_inputs, parse_decoders


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m fairseq_plugins.bench.latency", description=__doc__.split("\n\n")[0],
        epilog="Other options go to fairseq-generate's parser; the decoders' own options (--block-size, --beta, "
               "--tau, --hybrid-length...) apply to every decoder unless a spec sets them (name:key=value).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter, allow_abbrev=False)
    add = parser.add_argument
    add("data", help="binarized data directory (fairseq-preprocess output) with the test split")
    add("--path", required=True, help="verifier checkpoint (a fairseq autoregressive model)")
    add("--drafter-path", help="block NAT drafter checkpoint (specdec, specdec++, drafter-only)")
    add("--decoders", default=default_decoders(),
        help="comma-separated specs: beamN (fairseq's search), or a --decoding name, optionally with "
             "options, e.g. specdec++:beta=5,tau=3 or gs-jacobi:block=4")
    add("--batch-sizes", default="1", help="comma-separated batch sizes to sweep (1: latency setting)")
    add_shared_options(add, threads_help="CPU threads for torch (torch.set_num_threads) and CTranslate2")
    add("--no-ctranslate2", action="store_true", help="no CTranslate2 rows even if the package is installed")
    add("--ct2-dir", help="keep (and reuse) the CTranslate2 conversion here; None: a temporary folder")
    return parser


def add_shared_options(add, threads_help: str = "CPU threads for torch (torch.set_num_threads)"):
    """Options of every timing harness (this one and ``bench.systems``): split, sentences,
    warm-up, device, threads, BPE removal, outputs, progress bar."""
    add("--gen-subset", default="test", help="split to decode")
    add("--max-sentences", type=int, default=0, help="decode only the first N sentences (0: all)")
    add("--warmup", type=int, default=10, help="untimed sentences decoded by each row before timing it")
    add("--device", choices=["cpu", "cuda"], default="cpu", help="where to decode")
    add("--fp16", action="store_true", help="half precision (CUDA only)")
    add("--threads", type=int, default=1, help=threads_help)
    add("--post-process", "--remove-bpe", nargs="?", const="subword_nmt", default=None,
        help="remove BPE before BLEU, as fairseq: subword_nmt (@@ ), sentencepiece, ...")
    add("--out-md", help="markdown table (with the hardware) to write")
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
    problems = shared_problems(args)
    if not args.batch_sizes or min(args.batch_sizes) < 1:
        problems.append("--batch-sizes must be positive integers")
    if problems:
        raise PluginError("; ".join(problems))


def shared_problems(args) -> List[str]:
    """What is wrong with the options of ``add_shared_options`` (empty: nothing)."""
    import torch

    checks = [
        (args.fp16 and args.device != "cuda", "--fp16 needs --device cuda"),
        (args.device == "cuda" and not torch.cuda.is_available(), "--device cuda: no CUDA device is available"),
        (args.threads < 1, f"--threads must be >= 1, got {args.threads}"),
        (args.warmup < 0 or args.max_sentences < 0, "--warmup and --max-sentences must be >= 0"),
    ]
    return [message for bad, message in checks if bad]


def say(message: str):
    print(f"[latency] {message}", file=sys.stderr, flush=True)


def progress_bar(args, total: int, desc: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="sent", disable=args.no_progress_bar, file=sys.stderr,
                dynamic_ncols=True)


def time_engine(args, label, engine_name, run, convert, batches_by_size, ids, detokenize, refs, found):
    """Warm up and time one decoder at every batch size; rows go to ``found``."""
    from fairseq_plugins.bench import summary, timing

    rows, outputs = found
    for bs, batches in batches_by_size.items():
        timing.warm_up(run, batches, args.warmup, args.device)
        with progress_bar(args, len(ids), f"{label} (batch {bs})") as bar:
            results = timing.time_batches(run, convert, batches, args.device, bar)
        row = summary.summarize(label, engine_name, bs, results, timing.batch_times(results, batches),
                                detokenize, refs)
        rows.append(row)
        outputs[summary.row_key(row)] = {i: r.output.symbols for i, r in results.items()}


def run_fairseq_decoders(args, engine, specs, batches_by_size, ids, refs, found, skipped):
    """Every plugin/fairseq decoder; ones whose inputs are missing are skipped."""
    for spec in specs:
        reason = missing_inputs(spec, args.drafter_path)
        generator = None
        if reason is None:
            try:
                generator = engine.build_generator(spec, args.drafter_path)
            except (PluginError, FileNotFoundError, OSError) as error:
                reason = f"cannot build the generator: {error}"
        if reason is not None:
            say(f"skipping {spec.label}: {reason}")
            skipped.append({"decoder": spec.label, "reason": reason})
            continue
        time_engine(args, spec.label, "fairseq", engine.runner(generator), engine.outputs(spec),
                    batches_by_size, ids, engine.detokenize, refs, found)


def run_ctranslate2(args, engine, batches_by_size, ids, refs, found) -> Dict[str, object]:
    """CTranslate2 greedy and beam-5 rows, or why they are skipped."""
    from fairseq_plugins.bench import ct2

    if args.no_ctranslate2:
        say("CTranslate2 rows skipped: --no-ctranslate2")
        return {"status": "skipped", "reason": "--no-ctranslate2"}
    module, reason = ct2.import_ctranslate2()
    if module is None:
        say(f"CTranslate2 rows skipped: {reason}")
        return {"status": "skipped", "reason": reason}
    workspace = ct2.Workspace(args.ct2_dir)
    try:
        model_dir = ct2.convert(module, engine, args.path, workspace.path)
        translator = ct2.make_translator(module, model_dir, args.device, args.threads, args.fp16)
        symbols = ct2.sources(engine, next(iter(batches_by_size.values())))
        max_positions = engine.models[0].max_decoder_positions()
        for label, beam in ct2.BEAMS:
            run = ct2.runner(translator, symbols, beam, engine.cfg.generation, max_positions)
            time_engine(args, label, "ctranslate2", run, ct2.outputs(beam), batches_by_size, ids, engine.detokenize,
                        refs, found)
    except Exception as error:  # conversion/decoding problems of an optional third-party engine
        say(f"CTranslate2 rows skipped: {ct2.reason(error)}")
        return {"status": "skipped", "reason": ct2.reason(error)}
    finally:
        workspace.close()
    return {"status": "ok", "version": getattr(module, "__version__", None)}


def benchmark(args, extra) -> dict:
    """Load once, time every decoder, compare; the result behind all outputs."""
    import torch

    from fairseq_plugins.bench import fairseq_engine, summary
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
    refs = engine.references(ids)
    rows, outputs, skipped = [], {}, []
    found = (rows, outputs)  # filled by the runs: rows, and row key -> id -> output symbols
    run_fairseq_decoders(args, engine, specs, batches_by_size, ids, refs, found, skipped)
    ct2_status = run_ctranslate2(args, engine, batches_by_size, ids, refs, found)
    summary.add_comparisons(rows, outputs)
    hardware = {**fairseq_engine.hardware(args.device, args.threads), "fp16": args.fp16}
    settings = {"data": args.data, "path": args.path, "drafter_path": args.drafter_path, "gen_subset": args.gen_subset,
                "sentences": len(ids), "too_long": too_long, "warmup": args.warmup, "batch_sizes": args.batch_sizes,
                "decoders": [s.label for s in specs], "post_process": args.post_process, "fairseq_args": extra}
    return {"hardware": hardware, "settings": settings, "rows": rows, "skipped": skipped, "ctranslate2": ct2_status}


def main(argv=None) -> dict:
    from fairseq_plugins.bench import report

    args, extra = parse_args(argv)
    result = benchmark(args, extra)
    for path in report.write_all(result, args.out_md, args.out_png, args.out_json):
        say(f"wrote {path}")
    print(report.markdown(result), end="")
    return result


def cli_main():
    try:
        main()
    except PluginError as error:
        sys.exit(f"latency: error: {error}")


if __name__ == "__main__":
    cli_main()
