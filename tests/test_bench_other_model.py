"""The latency harness with a second model (``--model NAME=CHECKPOINT``, rows ``...:model=NAME``): its rows decode
with that model, are timed against --path's baselines and compared, output for output, with its own greedy rows."""
import pytest

from fairseq_plugins.bench import latency, report, summary
from fairseq_plugins.scripts import copy_layers
from fairseq_plugins_compat.errors import PluginError

QUICK = ["--max-len-b", "20", "--warmup", "1", "--no-progress-bar", "--no-ctranslate2", "--max-sentences", "6"]
OTHER_ROWS = ["beam1:model=deep", "greedy:model=deep", "iad:model=deep"]


@pytest.fixture(scope="module")
def deep_model(tiny_checkpoint, tmp_path_factory):
    """Another model of the same data: the tiny checkpoint's 3+1-layer warm start (untrained, so its outputs
    differ from the tiny model's)."""
    path = tmp_path_factory.mktemp("deep") / "deep.pt"
    copy_layers.main([str(tiny_checkpoint), str(path), "--encoder-layers", "3", "--decoder-layers", "1"])
    return path


def run(data, path, decoders, *extra):
    result = latency.main([str(data), "--path", str(path), "--decoders", ",".join(decoders), *QUICK, *extra])
    return {row["decoder"]: row for row in result["rows"]}, result


def test_rows_of_another_model_decode_with_it(reverse_data, tiny_checkpoint, deep_model):
    rows, result = run(reverse_data, tiny_checkpoint, ["beam1", "greedy", "iad", *OTHER_ROWS],
                       "--model", f"deep={deep_model}")
    alone, _ = run(reverse_data, deep_model, ["beam1"])
    assert rows["beam1:model=deep"]["outputs"] == alone["beam1"]["outputs"]
    assert rows["beam1:model=deep"]["outputs"] != rows["beam1"]["outputs"]
    assert [rows[label]["model"] for label in ("beam1", *OTHER_ROWS)] == [None, "deep", "deep", "deep"]
    assert rows["beam1:model=deep"]["tokens_per_iteration"] == 1.0  # greedy search: a step per token, on any model
    assert rows["beam1:model=deep"]["mean_iterations"] == rows["greedy:model=deep"]["mean_iterations"]
    # lossless on their own model: no difference from its greedy rows, though they differ from --path's
    for label in ("greedy:model=deep", "iad:model=deep"):
        assert rows[label]["mismatches_vs_greedy"] == 0 and rows[label]["mismatches_vs_greedy_decoder"] == 0
        assert rows[label]["outputs"] == rows["beam1:model=deep"]["outputs"]
    # timed against --path's baselines
    for label in OTHER_ROWS:
        row = rows[label]
        assert row["speedup_vs_greedy_total"] == pytest.approx(rows["beam1"]["total_s"] / row["total_s"])
        assert row["speedup_vs_greedy_decoder_total"] == pytest.approx(rows["greedy"]["total_s"] / row["total_s"])
    assert result["settings"]["models"] == {"deep": str(deep_model)}
    assert f"deep = `{deep_model}`" in report.markdown(result)


def test_without_its_own_greedy_rows_the_differences_are_not_counted():
    def row(label, model, total):
        return {"decoder": label, "engine": "fairseq", "batch_size": 1, "median_ms": total, "total_s": total,
                "model": model}

    rows = [row("beam1", None, 4.0), row("greedy", None, 2.0), row("iad:model=deep", "deep", 1.0)]
    outputs = {summary.row_key(r): {0: ["a"], 1: ["b"]} for r in rows}
    summary.add_comparisons(rows, outputs)
    deep = rows[2]
    assert deep["mismatches_vs_greedy"] is None and deep["mismatches_vs_greedy_decoder"] is None
    assert (deep["speedup_vs_greedy_total"], deep["speedup_vs_greedy_decoder_total"]) == (4.0, 2.0)
    assert rows[1]["mismatches_vs_greedy"] == 0


@pytest.mark.parametrize("argv, message", [
    (["--decoders", "beam1,iad:model=deep"], "iad:model=deep: no such --model name (given: none)"),
    (["--model", "deep", "--decoders", "beam1"], "--model: expected NAME=CHECKPOINT, got 'deep'"),
    (["--model", "deep=missing.pt", "--decoders", "beam1"], "--model deep: no such file: missing.pt"),
    (["--decoders", "beam1,oracle:model=deep"], "bad option 'model=deep'"),
])
def test_a_wrong_model_option_is_one_line(tmp_path, argv, message):
    with pytest.raises(PluginError, match=message.replace("(", r"\(").replace(")", r"\)")):
        latency.parse_args([str(tmp_path), "--path", "model.pt", *argv])
