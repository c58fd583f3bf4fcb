"""Several models side by side: BLEU and batch-1 decoding speed (tokens/s) of each system at
each beam size, relative to a baseline system at the same beam.

    python -m fairseq_plugins.bench.systems DATA \\
        --system single_l2r=ckpt/single_l2r/checkpoint_best.pt \\
        --system bidirectional=ckpt/bidirectional/checkpoint_best.pt \\
        --beams 1,5 --baseline single_l2r --remove-bpe sentencepiece --out-md systems.md

Each checkpoint is loaded under the task it was trained with (``double_token_translation``
with its saved ``--target-order``; any other fairseq translation model under
``speculative_translation``) and decoded with that task's own generator (``--beam N``).
Timing is the latency harness's (``fairseq_plugins.bench.latency``): the same sentences,
warm-up, fixed thread count, wall clock per batch.  tokens/s = output subword tokens (EOS
not counted) / total decoding time.  Other options go to fairseq-generate's parser
(``--max-len-b``, ``--lenpen``...).
"""
import argparse
import os
import sys
from typing import Dict, List, Optional, Tuple

from fairseq_plugins_compat.errors import PluginError, exit_on_plugin_error

from fairseq_plugins.bench.decoders import DecoderSpec
from fairseq_plugins.bench.latency import add_shared_options, shared_problems
from fairseq_plugins.bench.report import write_all


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m fairseq_plugins.bench.systems", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter, allow_abbrev=False)
    add = parser.add_argument
    add("data", help="binarized data directory (fairseq-preprocess output) with the test split")
    add("--system", action="append", required=True, metavar="NAME=CHECKPOINT",
        help="a system to compare (repeat the option); NAME labels its rows")
    add("--baseline", help="NAME of the system the speed ratios are relative to (default: the first)")
    add("--beams", default="1,5", help="comma-separated beam sizes to decode every system with")
    add("--nbest-equal-beam", action="store_true",
        help="decode with --nbest equal to the beam size: the double-token search (Algorithm 1) then stops once W "
             "hypotheses are finished, as fairseq's beam search always does, instead of the paper's K = 1")
    add("--batch-size", type=int, default=1, help="sentences per batch (1: latency setting)")
    add_shared_options(add)
    return parser


def parse_systems(items: List[str]) -> List[Tuple[str, str]]:
    """``["a=x.pt", "b=y.pt"]`` -> ``[("a", "x.pt"), ("b", "y.pt")]``; names unique."""
    systems = []
    for item in items:
        name, eq, path = item.partition("=")
        if not eq or not name.strip() or not path.strip():
            raise PluginError(f"--system: expected NAME=CHECKPOINT, got {item!r}")
        systems.append((name.strip(), path.strip()))
    names = [name for name, _ in systems]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise PluginError(f"--system: names given twice: {', '.join(twice)}")
    return systems


def parse_args(argv=None) -> Tuple[argparse.Namespace, List[str]]:
    """The harness's options and the rest (for fairseq's parser); every problem at once."""
    args, extra = get_parser().parse_known_args(argv)
    args.systems = parse_systems(args.system)
    problems = [f"--system {name}: no such file: {path}" for name, path in args.systems if not os.path.isfile(path)]
    try:
        args.beams = [int(b) for b in args.beams.split(",") if b.strip()]
    except ValueError:
        problems.append(f"--beams: expected comma-separated integers, got {args.beams!r}")
        args.beams = [1]
    names = [name for name, _ in args.systems]
    args.baseline = args.baseline or names[0]
    checks = [
        (args.baseline not in names, f"--baseline {args.baseline!r} is not a --system name ({', '.join(names)})"),
        (not args.beams or min(args.beams) < 1, "--beams must be positive integers"),
        (args.batch_size < 1, "--batch-size must be >= 1"),
    ]
    problems += [message for bad, message in checks if bad] + shared_problems(args)
    if problems:
        raise PluginError("; ".join(problems))
    return args, extra


def saved_task(path: str) -> Tuple[str, List[str], str]:
    """(task to load ``path`` under, its task options, a description) from the checkpoint's config."""
    from fairseq import checkpoint_utils

    from fairseq_plugins.bench.fairseq_engine import TASK

    state = checkpoint_utils.load_checkpoint_to_cpu(path)
    task_cfg = (state.get("cfg") or {}).get("task") or {}
    if task_cfg.get("_name") == "double_token_translation":
        order = str(task_cfg.get("target_order", "bidirectional"))
        return "double_token_translation", ["--target-order", order], order
    return TASK, [], task_cfg.get("_name") or "translation"


def load_engine(args, path: str, extra: List[str]):
    from fairseq_plugins.bench import fairseq_engine

    task, task_args, description = saved_task(path)
    cfg = fairseq_engine.fairseq_config(args.data, path, args.gen_subset, args.device, args.fp16,
                                        args.post_process, [*task_args, *extra], task=task)
    return fairseq_engine.FairseqEngine(cfg, args.device, args.fp16), description


def output_tokens(outputs: Dict[int, List[str]]) -> int:
    return sum(len(symbols) for symbols in outputs.values())


def time_system(args, name: str, path: str, extra: List[str], ids: Optional[List[int]]):
    """Rows (one per beam) of one system, and the sentence ids decoded."""
    from fairseq_plugins.bench.latency import time_engine
    from fairseq_plugins.bench.summary import row_key

    engine, description = load_engine(args, path, extra)
    if ids is None:
        ids, too_long = engine.sentence_ids(args.max_sentences)
        if too_long:
            say(f"{len(too_long)} sentences longer than {name}'s max source positions are not decoded")
    if not ids:
        raise PluginError(f"{args.data}: no sentence of the {args.gen_subset} split to decode")
    batches = {args.batch_size: engine.batches(ids, args.batch_size)}
    refs = engine.references(ids)
    rows, outputs = [], {}
    for beam in args.beams:
        spec = DecoderSpec(f"beam{beam}", "beam", beam=beam)
        engine.cfg.generation.nbest = beam if args.nbest_equal_beam else 1
        runner = engine.runner(engine.build_generator(spec, None))
        time_engine(args, f"{name} beam{beam}", "fairseq", runner, engine.outputs(spec), batches, ids,
                    engine.detokenize, refs, (rows, outputs))
        row = rows[-1]
        row.update(system=name, order=description, beam=beam, nbest=engine.cfg.generation.nbest, checkpoint=path,
                   output_tokens=output_tokens(outputs[row_key(row)]))
        row["tokens_per_s"] = row["output_tokens"] / row["total_s"] if row["total_s"] > 0 else None
    return rows, ids


def add_ratios(rows: List[dict], baseline: str):
    """Speed of each row relative to the baseline system at the same beam size."""
    base = {row["beam"]: row for row in rows if row["system"] == baseline}
    for row in rows:
        ref = base.get(row["beam"])
        row["tokens_per_s_ratio"] = row["tokens_per_s"] / ref["tokens_per_s"] if ref and ref["tokens_per_s"] else None
        row["speedup_median"] = ref["median_ms"] / row["median_ms"] if ref and row["median_ms"] else None
        row["bleu_delta"] = (row["bleu"] - ref["bleu"] if ref and row["bleu"] is not None
                             and ref["bleu"] is not None else None)


def benchmark(args, extra) -> dict:
    import torch

    from fairseq_plugins.bench.fairseq_engine import hardware

    torch.set_num_threads(args.threads)
    rows, ids = [], None
    for name, path in args.systems:
        system_rows, ids = time_system(args, name, path, extra, ids)
        rows += system_rows
    add_ratios(rows, args.baseline)
    settings = {"data": args.data, "gen_subset": args.gen_subset, "sentences": len(ids), "warmup": args.warmup,
                "batch_size": args.batch_size, "beams": args.beams, "nbest_equal_beam": args.nbest_equal_beam,
                "baseline": args.baseline,
                "systems": dict(args.systems), "post_process": args.post_process, "fairseq_args": extra}
    return {"hardware": {**hardware(args.device, args.threads), "fp16": args.fp16}, "settings": settings,
            "rows": rows}


NBEST_NOTE = {False: "--nbest 1 (the double-token search stops at its first finished hypothesis, the paper's K = 1; "
                    "fairseq's beam search always finishes W)",
              True: "--nbest = beam (every search finishes W hypotheses)"}
COLUMNS = ("system", "order", "beam", "BLEU", "ΔBLEU", "median ms", "p90 ms", "tokens/s", "tokens/s ratio",
           "median speedup", "steps / sent.")


def markdown(result: dict) -> str:
    from fairseq_plugins.bench.report import hardware_line

    s = result["settings"]

    def num(value, fmt):
        return "–" if value is None else fmt.format(value)

    lines = ["# Systems side by side", "", f"**Hardware:** {hardware_line(result['hardware'])}", "",
             f"**Setting:** `{s['data']}` ({s['gen_subset']}, {s['sentences']} sentences), batch {s['batch_size']}, "
             f"warm-up {s['warmup']} sentences; BLEU: sacreBLEU on detokenized output; tokens/s: output subword "
             f"tokens / total decoding time; ratios and ΔBLEU: vs `{s['baseline']}` at the same beam; "
             f"{NBEST_NOTE[s['nbest_equal_beam']]}.", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in result["rows"]:
        cells = [r["system"], r["order"], str(r["beam"]), num(r["bleu"], "{:.2f}"), num(r["bleu_delta"], "{:+.2f}"),
                 num(r["median_ms"], "{:.1f}"), num(r["p90_ms"], "{:.1f}"), num(r["tokens_per_s"], "{:.0f}"),
                 num(r["tokens_per_s_ratio"], "{:.2f}×"), num(r["speedup_median"], "{:.2f}×"),
                 num(r["mean_iterations"], "{:.1f}")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(result: dict, path: str):
    """tokens/s per system, one bar group per beam size, BLEU above each bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, beams = result["rows"], result["settings"]["beams"]
    systems = list(dict.fromkeys(r["system"] for r in rows))
    width = 0.8 / len(systems)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.6 * len(beams) * len(systems) / 2), 4.2))
    for j, system in enumerate(systems):
        by_beam = {r["beam"]: r for r in rows if r["system"] == system}
        xs = [i + (j - (len(systems) - 1) / 2) * width for i in range(len(beams))]
        bars = ax.bar(xs, [by_beam[b]["tokens_per_s"] or 0 for b in beams], width, label=system)
        for bar, beam in zip(bars, beams):
            if by_beam[beam]["bleu"] is not None:
                ax.annotate(f"{by_beam[beam]['bleu']:.1f}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(range(len(beams)))
    ax.set_xticklabels([f"beam {b}" for b in beams])
    ax.set_ylabel("output tokens / s (BLEU on top)")
    hw = result["hardware"]
    ax.set_title(f"Decoding speed, batch {result['settings']['batch_size']}\n"
                 f"{hw.get('gpu') or hw['cpu']}, {hw['threads']} thread(s)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=120)
    plt.close(fig)


def say(message: str):
    print(f"[systems] {message}", file=sys.stderr, flush=True)


def main(argv=None) -> dict:
    args, extra = parse_args(argv)
    result = benchmark(args, extra)
    for path in write_all(result, args.out_md, args.out_png, args.out_json, render_md=markdown, render_png=plot):
        say(f"wrote {path}")
    print(markdown(result), end="")
    return result


def cli_main():
    exit_on_plugin_error(main, "systems")


if __name__ == "__main__":
    cli_main()
