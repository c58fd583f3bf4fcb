"""DDGviz (Santilli et al. 2023, Figure 4): Jacobi iterations x target positions.

Row i is iteration i, column p output position p.  A cell shows the verifier's token at
p in that iteration and its probability:

    final      (grey)   final before iteration i (its probability when it became final)
    new-final  (green)  became final in iteration i; several in one row = decoded in
                        parallel (bold); the darker, the more probable
    predicted  (pale)   predicted but not final yet (the next Jacobi iterate)
    empty               not in the iteration's block (GS-Jacobi) or beyond the output

    python -m fairseq_plugins.viz.ddgviz DATA --path model.pt --decoding jacobi \\
        --ids 0 3 --out viz/ddg      # -> viz/ddg.0.png, .svg, .json, ...
"""
import argparse
import json
import math
from dataclasses import dataclass
from typing import List, Union

import numpy as np

from fairseq_plugins.viz.runner import add_common_args, decode_selected, out_path, run_main
from fairseq_plugins.viz.steps import SentenceTrace, Symbols, view_steps

EMPTY, PREDICTED, NEW_FINAL, FINAL = 0, 1, 2, 3
STATUS_NAMES = ("empty", "predicted", "new-final", "final")
LEGEND = ("cell: the verifier's token and probability.  green: final in this iteration (bold: several at once, "
          "decoded in parallel; darker = more probable); grey: final before; pale italic: predicted, not final yet")


@dataclass
class DDGGrid:
    """The data DDGviz plots, I iterations x N output positions (the EOS included).

    tokens: (I, N) display strings ("" where empty); probs: (I, N) float array, nan where
    empty or not recorded; status: (I, N) int array of EMPTY/PREDICTED/NEW_FINAL/FINAL;
    final_counts: (I,) positions final after each iteration (non-decreasing, last = N).
    """

    sentence_id: Union[int, str]
    source: str
    output: List[str]
    tokens: List[List[str]]
    probs: np.ndarray
    status: np.ndarray
    final_counts: List[int]

    def to_json(self) -> dict:
        return {
            "sentence_id": self.sentence_id, "source": self.source, "output": self.output,
            "iterations": len(self.tokens), "positions": len(self.output),
            "tokens": self.tokens, "final_counts": self.final_counts,
            "probs": [[None if math.isnan(p) else round(float(p), 6) for p in row] for row in self.probs],
            "status": [[STATUS_NAMES[s] for s in row] for row in self.status.tolist()],
        }


def ddg_grid(sentence: SentenceTrace, symbols: Symbols) -> DDGGrid:
    """The DDGviz matrix of one traced sentence (see the module docstring)."""
    views = view_steps(sentence)
    n_iter, n_pos = len(views), len(sentence.output)
    tokens = [[""] * n_pos for _ in range(n_iter)]
    probs = np.full((n_iter, n_pos), np.nan)
    status = np.zeros((n_iter, n_pos), dtype=np.int64)
    fixed_probs = [math.nan] * n_pos
    for i, view in enumerate(views):
        for p in range(view.start):
            tokens[i][p], probs[i, p], status[i, p] = symbols(sentence.output[p]), fixed_probs[p], FINAL
        choice_probs = view.step.choice_probs
        for j, choice in enumerate(view.choices[: n_pos - view.start]):
            p = view.start + j
            if j < view.gained:
                prob = view.final_prob(j)
                fixed_probs[p] = math.nan if prob is None else prob
                tokens[i][p], probs[i, p], status[i, p] = symbols(view.final[j]), fixed_probs[p], NEW_FINAL
            else:
                tokens[i][p], status[i, p] = symbols(choice), PREDICTED
                probs[i, p] = math.nan if choice_probs is None else choice_probs[j]
    final_counts = np.cumsum([view.gained for view in views]).tolist()
    return DDGGrid(sentence.sentence_id, symbols.source(sentence), symbols.many(sentence.output),
                   tokens, probs, status, final_counts)


def cell_colours(grid: DDGGrid, cmap) -> np.ndarray:
    """(I, N, 3) RGB: grey final, green new-final (darker = more probable), pale predicted."""
    rgb = np.ones(grid.status.shape + (3,))
    rgb[grid.status == FINAL] = (0.86, 0.86, 0.86)
    rgb[grid.status == PREDICTED] = (0.94, 0.95, 0.99)
    new = grid.status == NEW_FINAL
    shade = np.nan_to_num(grid.probs, nan=0.5)[new]
    rgb[new] = cmap(0.25 + 0.6 * shade)[:, :3]
    return rgb


def cell_label(token: str, prob: float) -> str:
    token = token if len(token) <= 9 else token[:8] + "…"
    return token if math.isnan(prob) else f"{token}\n{prob:.2f}"


def annotate(ax, grid: DDGGrid, fontsize: float):
    """Write token and probability in every non-empty cell."""
    for i, row in enumerate(grid.tokens):
        parallel = int((grid.status[i] == NEW_FINAL).sum()) > 1
        for p, token in enumerate(row):
            status, prob = grid.status[i, p], grid.probs[i, p]
            if status == EMPTY:
                continue
            dark = status == NEW_FINAL and not math.isnan(prob) and prob > 0.6
            ax.text(p, i, cell_label(token, prob), ha="center", va="center", fontsize=fontsize,
                    color="white" if dark else "#555555" if status == PREDICTED else "black",
                    fontweight="bold" if status == NEW_FINAL and parallel else "normal",
                    fontstyle="italic" if status == PREDICTED else "normal")


def draw(grid: DDGGrid, title: str = ""):
    """A matplotlib Figure of ``grid`` (Agg backend, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    n_iter, n_pos = grid.status.shape
    fig = Figure(figsize=(max(4.0, 0.8 * n_pos + 1.8), max(2.4, 0.55 * n_iter + 1.8)))
    ax = fig.add_subplot()
    ax.imshow(cell_colours(grid, colormaps["Greens"]), aspect="auto", interpolation="nearest")
    annotate(ax, grid, fontsize=7)
    ax.set_xticks(range(n_pos), [f"{p + 1}\n{t if len(t) <= 9 else t[:8] + '…'}" for p, t in enumerate(grid.output)],
                  fontsize=7)
    ax.set_yticks(range(n_iter), [str(i + 1) for i in range(n_iter)], fontsize=7)
    ax.set_xticks(np.arange(-0.5, n_pos), minor=True)
    ax.set_yticks(np.arange(-0.5, n_iter), minor=True)
    ax.grid(which="minor", color="white", linewidth=1.5)
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel("target position (final output token)")
    ax.set_ylabel("iteration")
    ax.set_title(title or f"DDGviz: sentence {grid.sentence_id}", fontsize=9)
    fig.text(0.01, 0.005, LEGEND, fontsize=6, color="#444444", va="bottom")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def save_figure(grid: DDGGrid, prefix: str, title: str = "") -> List[str]:
    """Write PREFIX.png and PREFIX.svg (tokens kept as SVG text); return the paths."""
    import matplotlib

    matplotlib.use("Agg")
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "ddgviz"}):
        fig = draw(grid, title)
        paths = [out_path(prefix, ".png"), out_path(prefix, ".svg")]
        fig.savefig(paths[0], dpi=100 if fig.get_figwidth() < 40 else 50)
        fig.savefig(paths[1], metadata={"Date": None})
    return paths


def figure_title(grid: DDGGrid, decoding: str) -> str:
    source = grid.source if len(grid.source) <= 90 else grid.source[:89] + "…"
    return f"DDGviz, --decoding {decoding}, sentence {grid.sentence_id}: {source}"


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m fairseq_plugins.viz.ddgviz",
        description="DDGviz: for each sentence, the iterations x target positions grid of final tokens and "
                    "their probabilities (Santilli et al. 2023, Figure 4), written as OUT.ID.png, .svg and .json.")
    add_common_args(parser, default_decoding="jacobi")
    return parser


def main(args) -> List[str]:
    task, sentences = decode_selected(args)
    symbols = Symbols(task.target_dictionary)
    written = []
    for sentence in sentences:
        grid = ddg_grid(sentence, symbols)
        prefix = f"{args.out}.{sentence.sentence_id}"
        written += save_figure(grid, prefix, figure_title(grid, args.decoding))
        with open(out_path(prefix, ".json"), "w", encoding="utf-8") as f:
            json.dump(grid.to_json(), f, ensure_ascii=False, indent=1)
        written.append(f"{prefix}.json")
    print("\n".join(written))
    return written


def cli_main(argv=None):
    run_main(main, get_parser(), argv)


if __name__ == "__main__":
    cli_main()
