"""plot_validation reads fairseq-train's validation lines and plots one curve per run."""
import subprocess
import sys

import pytest

from fairseq_plugins.scripts.plot_validation import collect, main, read_points
from fairseq_plugins_compat.errors import PluginError

LINE = ("2024-01-01 12:00:38 | INFO | valid | epoch {epoch:03d} | valid on 'valid' subset | loss 6.228 | "
        "glance_acc 0.2223 | spec_tokens_per_iter {value} | wps 449.7 | num_updates {updates}{best}")


def write_log(path, points, noise=True):
    lines = ["2024-01-01 12:00:00 | INFO | train_inner | epoch 001:  20 / 140 loss=6.1, num_updates=20"] if noise else []
    for epoch, updates, value in points:
        lines.append(LINE.format(epoch=epoch, value=value, updates=updates, best=" | best_spec_tokens_per_iter 9"))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_points_are_read_from_validation_lines_only(tmp_path):
    log = write_log(tmp_path / "a.log", [(1, 140, 1.34), (2, 280, 1.62)])
    assert read_points(log, "spec_tokens_per_iter") == [(1, 140, 1.34), (2, 280, 1.62)]
    assert read_points(log, "glance_acc") == [(1, 140, 0.2223), (2, 280, 0.2223)]
    assert read_points(log, "bleu") == []


def test_a_resumed_run_joins_its_logs_and_the_later_log_wins(tmp_path):
    first = write_log(tmp_path / "first.log", [(1, 140, 1.3), (2, 280, 1.6), (3, 420, 1.7)])
    resumed = write_log(tmp_path / "resumed.log", [(3, 420, 1.8), (4, 560, 2.0)])
    curves = collect([first, resumed], ["drafter", "drafter"], "spec_tokens_per_iter")
    assert curves == {"drafter": [(1, 140, 1.3), (2, 280, 1.6), (3, 420, 1.8), (4, 560, 2.0)]}


def test_every_validation_of_an_epoch_is_kept(tmp_path):
    log = write_log(tmp_path / "a.log", [(1, 140, 1.3), (1, 280, 1.5), (1, 386, 1.4), (2, 420, 1.6)])
    curves = collect([log], ["drafter"], "spec_tokens_per_iter")
    assert curves == {"drafter": [(1, 140, 1.3), (1, 280, 1.5), (1, 386, 1.4), (2, 420, 1.6)]}


def test_png_is_written(tmp_path, capsys):
    log = write_log(tmp_path / "a.log", [(1, 140, 1.34), (2, 280, 1.62)])
    out = tmp_path / "curve.png"
    main([log, "--out", str(out), "--label", "drafter"])
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "drafter: epoch 1 (140 updates) 1.34, epoch 2 (280 updates) 1.62" in capsys.readouterr().out


def test_a_log_without_the_metric_is_refused(tmp_path):
    log = write_log(tmp_path / "a.log", [(1, 140, 1.34)])
    with pytest.raises(PluginError, match="no validation line with 'bleu'"):
        main([log, "--metric", "bleu", "--out", str(tmp_path / "x.png")])


@pytest.mark.slow
def test_cli_errors_are_one_line(tmp_path):
    result = subprocess.run([sys.executable, "-m", "fairseq_plugins.scripts.plot_validation", str(tmp_path / "nope.log"),
                             "--out", str(tmp_path / "x.png")], capture_output=True, text=True)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [f"plot_validation: error: {tmp_path / 'nope.log'}: no such log file"]


def test_long_titles_and_labels_stay_inside_the_figure(tmp_path):
    """A title or curve label longer than the figure is wide is wrapped, not cut off at the figure's edge."""
    from fairseq_plugins.scripts.plot_validation import figure

    long = "the demo drafter fine-tuned on the student verifier's greedy output (2 CPU cores, bfloat16 autocast)"
    curves = {long: [(1, 140, 3.5), (2, 280, 3.9)], "short": [(1, 140, 3.6), (2, 280, 3.8)]}
    fig = figure(curves, "spec_tokens_per_iter", title="the shipped drafter against the student verifier: " + long)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    for artist in (ax.title, ax.get_legend()):
        box = artist.get_window_extent(renderer)
        assert box.x0 >= 0 and box.y0 >= 0 and box.x1 <= fig.bbox.x1 and box.y1 <= fig.bbox.y1, artist
