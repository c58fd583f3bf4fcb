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
warm-up, fixed thread count, wall clock per batch, rows taking turns (``--rounds``).  tokens/s = output subword tokens (EOS
not counted) / total decoding time.  Other options go to fairseq-generate's parser
(``--max-len-b``, ``--lenpen``...).
"""
import argparse
import os
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from fairseq_plugins_compat.errors import PluginError, exit_on_plugin_error

from fairseq_plugins.bench.decoders import DecoderSpec
from fairseq_plugins.bench.latency import add_shared_options, parse_pairs, shared_problems
from fairseq_plugins.bench.report import write_all
from fairseq_plugins.bench.rounds import interleaved_chunks, round_ratios


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m fairseq_plugins.bench.systems", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter, allow_abbrev=False)
    add = parser.add_argument
    add("data", help="binarized data directory (fairseq-preprocess output) with the test split")
    add("--system", action="append", required=True, metavar="NAME=CHECKPOINT",
        help="a system to compare (repeat the option); NAME labels its rows")
    add("--baseline", help="NAME of the system the speed ratios are relative to (default: the first)")
    add("--baseline-of", action="append", default=[], metavar="NAME=BASELINE",
        help="compare system NAME with system BASELINE instead of --baseline (repeat the option), e.g. a model "
             "trained on distilled data with its own single-token baseline")
    add("--beams", default="1,5", help="comma-separated beam sizes to decode every system with")
    add("--nbest-equal-beam", action="store_true",
        help="decode with --nbest equal to the beam size (BLEU of the best; the double-token search then finishes "
             "W hypotheses whatever its --pair-beam-stop)")
    add("--batch-size", type=int, default=1, help="sentences per batch (1: latency setting)")
    add_shared_options(add)
    return parser


def parse_systems(items: List[str]) -> List[Tuple[str, str]]:
    """``["a=x.pt", "b=y.pt"]`` -> ``[("a", "x.pt"), ("b", "y.pt")]``; names unique."""
    systems = parse_pairs("--system", items, "CHECKPOINT")
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
    args.baselines = {name: args.baseline for name in names}
    for name, baseline in parse_pairs("--baseline-of", args.baseline_of, "BASELINE"):
        problems += [f"--baseline-of {name}={baseline}: {value!r} is not a --system name ({', '.join(names)})"
                     for value in (name, baseline) if value not in names]
        args.baselines[name] = baseline
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


def load_engines(args, extra: List[str]) -> List[Tuple[object, str]]:
    """(engine, description) of each --system; fairseq's config parsed once per task and task
    options, copied for each checkpoint."""
    from fairseq_plugins.bench import fairseq_engine

    configs, loaded = {}, []
    for _, path in args.systems:
        task, task_args, description = saved_task(path)
        key = (task, tuple(task_args))
        if key not in configs:
            configs[key] = fairseq_engine.fairseq_config(args.data, path, args.gen_subset, args.device, args.fp16,
                                                         args.post_process, [*task_args, *extra], task=task)
        cfg = fairseq_engine.config_for_path(configs[key], path)
        loaded.append((fairseq_engine.FairseqEngine(cfg, args.device, args.fp16), description))
    return loaded


@dataclass
class System:
    """One loaded system: its engine, what it is, and the row templates of its beams."""

    name: str
    path: str
    engine: object  # fairseq_engine.FairseqEngine
    description: str
    rows: List[object]  # rounds.Row, one per beam
    nbest: Dict[int, int]  # beam -> --nbest it was built with


def build_system(args, name: str, path: str, loaded: Tuple[object, str], ids: List[int]) -> System:
    """The system (``loaded``: its engine and description) with one row per beam size (its
    own batches of ``ids``)."""
    from fairseq_plugins.bench.rounds import Row

    engine, description = loaded
    batches = engine.batches(ids, args.batch_size)
    rows, nbest = [], {}
    for beam in args.beams:
        spec = DecoderSpec(f"beam{beam}", "beam", beam=beam)
        engine.cfg.generation.nbest = nbest[beam] = beam if args.nbest_equal_beam else 1
        rows.append(Row(f"{name} beam{beam}", "fairseq", engine.runner(engine.build_generator(spec, None)),
                        engine.outputs(spec), batches))
    return System(name, path, engine, description, rows, nbest)


def sentence_ids(args, name: str, engine) -> List[int]:
    """The sentences every system decodes (those the first system can take)."""
    ids, too_long = engine.sentence_ids(args.max_sentences)
    if too_long:
        say(f"{len(too_long)} sentences longer than {name}'s max source positions are not decoded")
    if not ids:
        raise PluginError(f"{args.data}: no sentence of the {args.gen_subset} split to decode")
    return ids


def time_systems(args, systems: List[System], ids: List[int]) -> List[dict]:
    """Every system's rows, taking turns (``bench.rounds``): one summary row per system and beam."""
    from fairseq_plugins.bench import rounds
    from fairseq_plugins.bench.latency import progress_bar
    from fairseq_plugins.bench.summary import summarize
    from fairseq_plugins.bench.timing import batch_times

    rows = [row for system in systems for row in system.rows]
    with progress_bar(args, len(ids) * len(rows), f"batch {args.batch_size}") as bar:
        timed = rounds.time_in_rounds(rows, args.rounds, args.warmup, args.device, bar)
    found = []
    for system in systems:
        refs = system.engine.references(ids)
        for beam, row in zip(args.beams, system.rows):
            results = timed[row.key].results
            summary = summarize(row.label, "fairseq", args.batch_size, results, batch_times(results, row.batches),
                                system.engine.detokenize, refs)
            summary.update(system=system.name, order=system.description, beam=beam, nbest=system.nbest[beam],
                           checkpoint=system.path, round_s=timed[row.key].round_s,
                           round_tokens=round_tokens(results, row.batches, args.rounds),
                           output_tokens=sum(summary["output_lengths"]))
            summary["tokens_per_s"] = summary["output_tokens"] / summary["total_s"] if summary["total_s"] > 0 else None
            found.append(summary)
    return found


def round_tokens(results, batches, rounds: int) -> List[int]:
    """Output tokens (EOS not counted) decoded in each round."""
    return [sum(len(results[i].output.symbols) for batch in chunk for i in batch.ids)
            for chunk in interleaved_chunks(batches, rounds)]


def add_ratios(rows: List[dict], baselines: Dict[str, str]):
    """Speed and BLEU of each row relative to its system's baseline (``baselines``: system ->
    baseline system) at the same beam size."""
    by_key = {(row["system"], row["beam"]): row for row in rows}
    for row in rows:
        ref = by_key.get((baselines[row["system"]], row["beam"]))
        row["baseline"] = baselines[row["system"]]
        row["tokens_per_s_ratio"] = row["tokens_per_s"] / ref["tokens_per_s"] if ref and ref["tokens_per_s"] else None
        row["tokens_per_s_ratio_rounds"] = ratio_range(ref, row)
        row["speedup_median"] = ref["median_ms"] / row["median_ms"] if ref and row["median_ms"] else None
        row["bleu_delta"] = (row["bleu"] - ref["bleu"] if ref and row["bleu"] is not None
                             and ref["bleu"] is not None else None)


def ratio_range(ref: dict, row: dict):
    """[lowest, highest] per-round tokens/s ratio of ``row`` over ``ref``; None with one round."""
    if ref is None or len(row["round_s"]) < 2:
        return None
    speed = [tokens / seconds for tokens, seconds in zip(row["round_tokens"], row["round_s"])]
    ref_speed = [tokens / seconds for tokens, seconds in zip(ref["round_tokens"], ref["round_s"])]
    ratios = round_ratios(speed, ref_speed)  # speed / ref_speed, round by round
    return [min(ratios), max(ratios)]


def benchmark(args, extra) -> dict:
    import torch

    from fairseq_plugins.bench.fairseq_engine import hardware

    torch.set_num_threads(args.threads)
    loaded = load_engines(args, extra)
    ids = sentence_ids(args, args.systems[0][0], loaded[0][0])
    systems = [build_system(args, name, path, engine, ids) for (name, path), engine in zip(args.systems, loaded)]
    rows = time_systems(args, systems, ids)
    add_ratios(rows, args.baselines)
    settings = {"data": args.data, "gen_subset": args.gen_subset, "sentences": len(ids), "warmup": args.warmup,
                "rounds": len(interleaved_chunks(systems[0].rows[0].batches, args.rounds)),
                "batch_size": args.batch_size, "beams": args.beams, "nbest_equal_beam": args.nbest_equal_beam,
                "pair_beam_stop": double_token_option([engine for engine, _ in loaded], "pair_beam_stop"),
                "packed_linears": double_token_option([engine for engine, _ in loaded], "packed_linears"),
                "baseline": args.baseline,
                "baseline_of": {name: base for name, base in args.baselines.items() if base != args.baseline},
                "systems": dict(args.systems), "post_process": args.post_process, "fairseq_args": extra}
    return {"hardware": {**hardware(args.device, args.threads), "fp16": args.fp16}, "settings": settings,
            "rows": rows}


def double_token_option(engines, name: str) -> Optional[str]:
    """The double-token systems' task option ``name`` (e.g. ``pair_beam_stop``; one value, the
    command line's, for all of them; None: no double-token system)."""
    values = {str(getattr(engine.task.cfg, name)) for engine in engines if hasattr(engine.task.cfg, name)}
    return values.pop() if values else None


def packed_note(settings: dict) -> str:
    """Which matrix products the double-token task ran, for the table's setting line."""
    packed = settings.get("packed_linears")
    if packed is None:
        return ""
    if packed == "off":
        return "; --packed-linears off (F.linear throughout)"
    return "; --packed-linears auto (float32 products over several rows with weights packed once, every system alike)"


def stop_note(settings: dict) -> str:
    """How the beam searches stopped, for the table's setting line."""
    if settings["nbest_equal_beam"]:
        return "--nbest = beam (every search finishes W hypotheses)"
    if settings.get("pair_beam_stop") is None:
        return "--nbest 1"
    if settings["pair_beam_stop"] == "beam":
        return "--pair-beam-stop beam (the double-token search finishes W hypotheses and returns the best, as fairseq's)"
    return ("--nbest 1, --pair-beam-stop nbest (the double-token search stops at its first finished hypothesis, "
            "the paper's K = 1; fairseq's beam search always finishes W)")


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
             f"tokens / total decoding time; ratios and ΔBLEU: vs `{s['baseline']}` at the same beam"
             f"{other_baselines(s)}; "
             f"{stop_note(s)}{packed_note(s)}; the rows take turns in {s['rounds']} round(s), each decoding the "
             "same interleaved chunk of the sentences per round (a drifting machine speed slows every row alike); "
             "in brackets: the lowest and highest per-round tokens/s ratio.", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in result["rows"]:
        cells = [r["system"], r["order"], str(r["beam"]), num(r["bleu"], "{:.2f}"), num(r["bleu_delta"], "{:+.2f}"),
                 num(r["median_ms"], "{:.1f}"), num(r["p90_ms"], "{:.1f}"), num(r["tokens_per_s"], "{:.0f}"),
                 num(r["tokens_per_s_ratio"], "{:.2f}×") + spread(r.get("tokens_per_s_ratio_rounds")),
                 num(r["speedup_median"], "{:.2f}×"),
                 num(r["mean_iterations"], "{:.1f}")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def other_baselines(settings: dict) -> str:
    """The systems compared with another baseline than --baseline, for the table's setting line."""
    pairs = (settings.get("baseline_of") or {}).items()
    return "".join(f" ({name}: vs `{base}`)" for name, base in pairs)


def spread(low_high) -> str:
    return f" ({low_high[0]:.2f}–{low_high[1]:.2f})" if low_high else ""


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
    for path in write_all(result, args.out_md, args.out_png, args.out_json, render_md=markdown, render_png=plot,
                          md_section=args.md_section):
        say(f"wrote {path}")
    print(markdown(result), end="")
    return result


def cli_main():
    exit_on_plugin_error(main, "systems")


if __name__ == "__main__":
    cli_main()
