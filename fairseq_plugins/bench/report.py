"""Writing the benchmark: a markdown table with the hardware, a PNG plot, a JSON of all numbers;
the table either as a whole file or as one marked section of a document (``--md-section``)."""
import json
import os
import re
from typing import Callable, List, Optional

COLUMNS = ("decoder", "batch", "arithmetic", "median ms", "p90 ms", "total s", "speedup vs beam1 (median / total)",
           "speedup vs greedy (median / total)", "speedup vs beam-5 (median / total)", "iterations / sent.",
           "tokens / iteration", "BLEU", "≠ beam1", "≠ greedy")  # "BLEU": the score's header (--score)


def _num(value, fmt="{:.2f}") -> str:
    return "–" if value is None else fmt.format(value)


def _speedup(row: dict, name: str) -> str:
    median, total = row.get(f"speedup_vs_{name}_median"), row.get(f"speedup_vs_{name}_total")
    if median is None:
        return "–"
    spread = row.get(f"speedup_vs_{name}_rounds")
    return f"{median:.2f}× / {total:.2f}×" + (f" ({spread[0]:.2f}–{spread[1]:.2f})" if spread else "")


def table_line(row: dict) -> str:
    """One markdown table line of a row."""
    name = row["decoder"] if row["engine"] == "fairseq" else f"{row['decoder']} ({row['engine']})"
    cells = [name, str(row["batch_size"]), row.get("arithmetic") or "–", _num(row["median_ms"], "{:.1f}"),
             _num(row["p90_ms"], "{:.1f}"), _num(row["total_s"], "{:.3f}"), _speedup(row, "greedy"),
             _speedup(row, "greedy_decoder"), _speedup(row, "beam5"), _num(row["mean_iterations"], "{:.1f}"),
             _num(row["tokens_per_iteration"]), _num(row["score"]),
             _num(row.get("mismatches_vs_greedy"), "{:d}"),
             _num(row.get("mismatches_vs_greedy_decoder"), "{:d}")]
    return "| " + " | ".join(cells) + " |"


def hardware_line(hw: dict) -> str:
    parts = [f"CPU: {hw['cpu']}", f"threads: {hw['threads']}", f"device: {hw['device']}"]
    if hw.get("gpu"):
        parts.insert(0, f"GPU: {hw['gpu']} (CUDA {hw.get('cuda')})")
    parts += [f"fp16: {'yes' if hw.get('fp16') else 'no'}", f"torch {hw['torch']}", f"fairseq {hw['fairseq']}",
              f"Python {hw['python']}"]
    return " · ".join(parts)


def markdown(result: dict) -> str:
    """The whole report: hardware, settings, the table, skipped decoders."""
    from fairseq_plugins.bench.task_score import DESCRIPTIONS, HEADERS

    s = result["settings"]
    score = s.get("score", "bleu")
    lines = ["# Decoding latency", "", f"**Hardware:** {hardware_line(result['hardware'])}", "",
             f"**Setting:** `{s['path']}`{other_models(s.get('models'))} on `{s['data']}` ({s['gen_subset']}, "
             f"{s['sentences']} sentences), "
             f"warm-up {s['warmup']} sentences; latency = wall time of the batch a sentence is decoded in; "
             "speedups are ratios of median latencies / of total times, against fairseq's own greedy search "
             "(`beam1`), the plugin's `greedy` decoder (the same lean verifier as the drafting rows, nothing "
             f"drafted: what drafting itself adds) and fairseq's beam 5; {HEADERS[score]}: {DESCRIPTIONS[score]}; "
             "≠ beam1 / ≠ greedy: sentences whose output differs from that row's; arithmetic: the number format of "
             "the row's matrix products.  "
             f"{rounds_sentence(s.get('rounds'))}", "",
             "| " + " | ".join(columns(score)) + " |", "|" + "---|" * len(COLUMNS)]
    lines += [table_line(row) for row in result["rows"]]
    notes = [f"- {item['decoder']}: skipped ({item['reason']})" for item in result["skipped"]]
    ct2 = result.get("ctranslate2", {})
    if ct2.get("status") == "skipped":
        notes.append(f"- CTranslate2: skipped ({ct2['reason']})")
    if ct2.get("unsupported"):
        notes.append(f"- CTranslate2: compute types this build lacks on the device: {', '.join(ct2['unsupported'])}")
    if notes:
        lines += ["", *notes]
    if result.get("profile") is not None:
        lines += ["", *profile_table(result["profile"])]
    return "\n".join(lines) + "\n"


def columns(score: str) -> tuple:
    """The table's header cells, the score column named after ``score`` (``bench.task_score``)."""
    from fairseq_plugins.bench.task_score import HEADERS

    return tuple(HEADERS[score] if name == "BLEU" else name for name in COLUMNS)


def other_models(models: Optional[dict]) -> str:
    """The --model checkpoints, for the setting line (rows ``...:model=NAME`` decode with them)."""
    if not models:
        return ""
    named = ", ".join(f"{name} = `{path}`" for name, path in models.items())
    return (f" (rows `:model=NAME`: {named}; compared with their own model's `beam1` / `greedy` rows in the ≠ "
            "columns, timed against this model's)")


def rounds_sentence(rounds: Optional[dict]) -> str:
    """How the rows took turns (``bench.rounds``), for the setting line."""
    if not rounds or max(rounds.values()) < 2:
        return "Rows timed one after another (one round)."
    counts = ", ".join(f"{n} at batch {bs}" for bs, n in rounds.items())
    return (f"Rows take turns in rounds ({counts}): every row decodes the same interleaved chunk of the sentences "
            "in each round (after one untimed batch of it), so a drifting machine speed slows all rows alike; in "
            "brackets: the lowest and highest per-round total speedup.")


PROFILE_COLUMNS = ("decoder", "batch", "iterations", "greedy steps / iteration", "encoder", "drafter", "verifier",
                   "accept", "other", "profiled", "measured", "greedy step ms")


def profile_table(entries: List[dict]) -> List[str]:
    """The --profile table: one iteration's cost in greedy steps, split into its parts."""
    lines = ["**Cost of one iteration (greedy steps)**", "",
             "One greedy step = `beam1`'s total time / its decoder steps (output tokens with EOS; at batch size "
             "B > 1 the longest output of each batch).  Measured on one extra untimed pass with the core's "
             "sections timed (CUDA synchronised): encoder = once per batch (verifier encoder, its cache, the "
             "drafter's start), amortised as the pass's encoder time / its iterations; drafter = propose + update; "
             "verifier = one pass over the pending token + the draft; accept = acceptance, appending, cache "
             "rollback, retiring rows; other = the rest of the pass; profiled = the pass's time / its iterations; "
             "iterations = the timed row's at batch size 1, else the pass's (with `--draft-length measured` the "
             "two passes can differ a little: timings decide where the drafter is skipped); measured = the timed "
             "row's total time / iterations.  Speedup vs greedy (total) = greedy steps per iteration / measured.", ""]
    if not entries:
        return lines + ["No row was profiled (the speculative rows were skipped, or are not the speculative core)."]
    lines += ["| " + " | ".join(PROFILE_COLUMNS) + " |", "|" + "---|" * len(PROFILE_COLUMNS)]
    for e in entries:
        cells = [e["decoder"], str(e["batch_size"]), str(e["iterations"]), _num(e["greedy_steps_per_iteration"]),
                 *[_num(e[name]) for name in ("encoder", "drafter", "verifier", "accept", "other", "profiled",
                                              "measured")], _num(e["greedy_step_ms"], "{:.3f}")]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def plot(result: dict, path: str):
    """Median latency per decoder (bars, p90 as a whisker), speedup vs fairseq's greedy (beam1) on top."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    batch_sizes = sorted({r["batch_size"] for r in rows})
    labels = list(dict.fromkeys(_plot_label(r) for r in rows))
    width = 0.8 / max(1, len(batch_sizes))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(labels) + 2), 4.5))
    for j, bs in enumerate(batch_sizes):
        sub = {_plot_label(r): r for r in rows if r["batch_size"] == bs}
        xs = [i + (j - (len(batch_sizes) - 1) / 2) * width for i, label in enumerate(labels) if label in sub]
        present = [sub[label] for label in labels if label in sub]
        medians = [r["median_ms"] for r in present]
        whiskers = [[0] * len(present), [r["p90_ms"] - r["median_ms"] for r in present]]
        bars = ax.bar(xs, medians, width, yerr=whiskers, capsize=3, label=f"batch {bs}")
        for bar, r in zip(bars, present):
            if r.get("speedup_vs_greedy_median") is not None:
                top = max(bar.get_height(), r["p90_ms"])  # above the whisker
                ax.annotate(f"{r['speedup_vs_greedy_median']:.2f}×", (bar.get_x() + bar.get_width() / 2, top),
                            ha="center", va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("median latency per sentence (ms); whisker: p90")
    ax.set_title(f"Decoding latency (speedup vs beam1 on top)\n{_short_hardware(result['hardware'])}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=120)
    plt.close(fig)


def _plot_label(row: dict) -> str:
    return row["decoder"] if row["engine"] == "fairseq" else f"{row['decoder']}\n({row['engine']})"


def _short_hardware(hw: dict) -> str:
    where = hw.get("gpu") or hw["cpu"]
    return f"{where}, {hw['threads']} thread(s), torch {hw['torch']}"


def write_all(result: dict, out_md: Optional[str], out_png: Optional[str], out_json: Optional[str],
              render_md: Optional[Callable[[dict], str]] = None,
              render_png: Optional[Callable[[dict, str], None]] = None, md_section: Optional[str] = None) -> List[str]:
    """Write the requested outputs (markdown by ``render_md``, default this module's table, as the whole
    file or, with ``md_section``, as that section of it: :func:`write_section`; PNG by ``render_png``,
    default its plot); return their paths."""
    render_md, render_png = render_md or markdown, render_png or plot

    def write_md(path):
        if md_section:
            write_section(path, md_section, without_title(render_md(result)))
        else:
            _write_text(path, render_md(result))

    writers = ((out_json, lambda path: _write_text(path, json.dumps(result, indent=1) + "\n")),
               (out_md, write_md), (out_png, lambda path: render_png(result, path)))
    written = []
    for path, write in writers:
        if path:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            write(path)
            written.append(path)
    return written


SECTION_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def section_markers(name: str):
    """The lines that open and close the generated section ``name`` of a markdown file."""
    return f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"


def write_section(path: str, name: str, text: str):
    """Replace what lies between the markers of section ``name`` (:func:`section_markers`) in ``path`` with
    ``text``; a file without that section gets it at its end (a missing file is created).  The rest of the
    file (the prose around the tables) is kept byte for byte."""
    start, end = section_markers(name)
    old = _read_text(path)
    block = f"{start}\n{text.rstrip()}\n{end}"
    before, found, rest = old.partition(start)
    if found and end in rest:
        new = before + block + rest.split(end, 1)[1]
    else:
        new = old.rstrip("\n") + ("\n\n" if old.strip() else "") + block + "\n"
    _write_text(path, new)


def without_title(text: str) -> str:
    """A report without its ``# title`` line (a document's section has its own heading)."""
    lines = text.splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    return "\n".join(lines).strip("\n") + "\n"


def _read_text(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def _write_text(path: str, text: str):
    with open(path, "w") as f:
        f.write(text)
