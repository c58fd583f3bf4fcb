"""Plot a validation metric of fairseq-train logs against updates (one line per log).

    python -m fairseq_plugins.scripts.plot_validation train.log [more.log ...] \\
        --metric spec_tokens_per_iter --out curve.png

Reads fairseq's ``valid on 'valid' subset | ... | METRIC X | ... | num_updates N`` lines
(``--log-format simple``, what the recipes write); logs of one resumed run (resumed
trainings append new logs) are given in order with the same ``--label``.
"""
import argparse
import re
import textwrap
from pathlib import Path
from typing import Dict, List, Tuple

from fairseq_plugins.scripts import output_file
from fairseq_plugins_compat.errors import PluginError, exit_on_plugin_error

VALID_LINE = re.compile(r"valid on '[^']+' subset \|(.*)")


def read_points(path: str, metric: str) -> List[Tuple[int, int, float]]:
    """(epoch, num_updates, value) of every validation line of the log that has ``metric``."""
    points = []
    for line in Path(path).read_text(errors="replace").splitlines():
        match = VALID_LINE.search(line)
        if not match:
            continue
        fields = dict(_pair(item) for item in match.group(1).split("|") if item.strip())
        epoch_match = re.search(r"epoch (\d+)", line)
        if metric in fields and "num_updates" in fields and epoch_match:
            points.append((int(epoch_match.group(1)), int(float(fields["num_updates"])), float(fields[metric])))
    return points


def _pair(item: str) -> Tuple[str, str]:
    name, _, value = item.strip().rpartition(" ")
    return name.strip(), value


def collect(logs: List[str], labels: List[str], metric: str) -> Dict[str, List[Tuple[int, int, float]]]:
    """label -> points sorted by updates (a later log's point at the same number of updates wins; every
    validation of an epoch is kept: ``--validate-interval-updates`` validates several times an epoch)."""
    curves: Dict[str, Dict[int, Tuple[int, int, float]]] = {}
    for path, label in zip(logs, labels):
        if not Path(path).is_file():
            raise PluginError(f"{path}: no such log file")
        for point in read_points(path, metric):
            curves.setdefault(label, {})[point[1]] = point
    if not curves:
        raise PluginError(f"no validation line with {metric!r} in {', '.join(logs)}")
    return {label: sorted(points.values(), key=lambda p: p[1]) for label, points in curves.items()}


TITLE_WIDTH, LABEL_WIDTH = 70, 55  # characters a line of the title / of a curve's label holds at figsize (6, 3.6)


def figure(curves, metric: str, title: str = ""):
    """The matplotlib figure of ``curves`` (label -> (epoch, updates, value) points); a long title or label is
    wrapped onto more lines (the figure grows to hold them) instead of running past the figure's edge."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    for label, points in curves.items():
        ax.plot([p[1] for p in points], [p[2] for p in points], marker="o", markersize=3,
                label=textwrap.fill(label, LABEL_WIDTH))
    ax.set_xlabel("updates")
    ax.set_ylabel(f"valid {metric}")
    if title:
        ax.set_title(textwrap.fill(title, TITLE_WIDTH), fontsize="medium")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def plot(curves, metric: str, out: str, title: str = ""):
    import matplotlib.pyplot as plt

    fig = figure(curves, metric, title)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m fairseq_plugins.scripts.plot_validation",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+", help="fairseq-train logs (--log-format simple)")
    parser.add_argument("--metric", default="spec_tokens_per_iter",
                        help="validation metric to plot (default: spec_tokens_per_iter, the drafter's)")
    parser.add_argument("--label", action="append",
                        help="curve name of each log, in order (repeat; default: the log's file name; "
                             "give two logs the same label to join a resumed run)")
    parser.add_argument("--title", default="", help="plot title")
    parser.add_argument("--out", required=True, help="PNG to write")
    args = parser.parse_args(argv)
    labels = args.label or [Path(p).stem for p in args.logs]
    if len(labels) != len(args.logs):
        raise PluginError(f"--label given {len(labels)} times for {len(args.logs)} logs")
    curves = collect(args.logs, labels, args.metric)
    plot(curves, args.metric, output_file(args.out), args.title)
    for label, points in curves.items():
        print(f"{label}: " + ", ".join(f"epoch {e} ({u} updates) {v:g}" for e, u, v in points))
    print(f"wrote {args.out}")


def cli_main():
    exit_on_plugin_error(main, "plot_validation")


if __name__ == "__main__":
    cli_main()
