"""Latency harness (``python -m fairseq_plugins.bench.latency``) on the tiny trained checkpoint:
the JSON/markdown/PNG outputs, lossless decoders vs both greedy rows (fairseq's ``beam1`` and the
plugin's ``greedy``), the arithmetic cell, markdown sections, skipped rows, decoder specs, recipe."""
import json
import os
import subprocess
import sys

import pytest
import torch

from conftest import BIN_DIR, REPO
from fairseq_plugins.bench import arithmetic, ct2, latency, report
from fairseq_plugins.bench.decoders import parse_decoders, split_specs
from fairseq_plugins.bench.timing import percentile
from fairseq_plugins.decoding.registry import decoder_names
from fairseq_plugins_compat.errors import PluginError

DECODERS = ["beam1", "greedy", "beam5", "iad", "gs-jacobi"]
LOSSLESS = ["greedy", "iad", "gs-jacobi"]  # compared with beam1
QUICK = ["--max-len-b", "20", "--warmup", "1", "--no-progress-bar"]  # tiny model: short outputs


def harness_args(data, checkpoint, decoders, out=None, sentences=6):
    argv = [str(data), "--path", str(checkpoint), "--decoders", decoders, "--max-sentences", str(sentences), *QUICK]
    if out is not None:
        argv += ["--out-md", str(out / "t.md"), "--out-png", str(out / "t.png"), "--out-json", str(out / "t.json")]
    return argv


@pytest.fixture(scope="module")
def bench(reverse_data, tiny_checkpoint, tmp_path_factory):
    """One harness run with five fairseq decoders (no CTranslate2 rows); (output folder, JSON written)."""
    out = tmp_path_factory.mktemp("latency")
    latency.main(harness_args(reverse_data, tiny_checkpoint, ",".join(DECODERS), out) + ["--no-ctranslate2"])
    with open(out / "t.json") as f:
        return out, json.load(f)


def rows_by_decoder(result):
    return {row["decoder"]: row for row in result["rows"]}


def test_json_has_a_row_per_decoder_with_positive_latencies(bench):
    _, result = bench
    assert [row["decoder"] for row in result["rows"]] == DECODERS
    for row in result["rows"]:
        assert row["engine"] == "fairseq" and row["batch_size"] == 1 and row["sentences"] == 6
        assert len(row["latencies_ms"]) == 6 and all(ms > 0 for ms in row["latencies_ms"])
        assert 0 < row["median_ms"] <= row["p90_ms"] and row["total_s"] > 0
        assert isinstance(row["bleu"], float)
    assert result["hardware"]["threads"] == 1 and result["hardware"]["torch"]
    assert result["settings"]["sentences"] == 6 and result["skipped"] == []


def test_lossless_decoders_match_both_greedy_rows(bench):
    rows = rows_by_decoder(bench[1])
    for name in LOSSLESS:
        assert rows[name]["mismatches_vs_greedy"] == 0 and rows[name]["mismatches_vs_greedy_decoder"] == 0, name
        assert rows[name]["bleu"] == rows["beam1"]["bleu"]
    beam5 = rows["beam5"]  # each count is at least the outputs of another length than that greedy row's
    for name, label in (("greedy", "beam1"), ("greedy_decoder", "greedy")):
        longer_or_shorter = sum(a != b for a, b in zip(beam5["output_lengths"], rows[label]["output_lengths"]))
        assert longer_or_shorter <= beam5[f"mismatches_vs_{name}"] <= beam5["sentences"]


def test_speedups_are_ratios_against_each_baseline(bench):
    rows = rows_by_decoder(bench[1])
    for name, label in (("greedy", "beam1"), ("greedy_decoder", "greedy"), ("beam5", "beam5")):
        base = rows[label]
        assert base[f"speedup_vs_{name}_median"] == 1.0 and base[f"speedup_vs_{name}_total"] == 1.0
        for row in rows.values():
            assert row[f"speedup_vs_{name}_median"] == pytest.approx(base["median_ms"] / row["median_ms"])
            assert row[f"speedup_vs_{name}_total"] == pytest.approx(base["total_s"] / row["total_s"])


def test_iterations_and_accepted_tokens(bench):
    rows = rows_by_decoder(bench[1])
    assert rows["beam1"]["tokens_per_iteration"] == 1.0
    assert rows["greedy"]["tokens_per_iteration"] == 1.0  # nothing drafted: one verified token per iteration
    assert rows["greedy"]["iterations"] == rows["beam1"]["iterations"]
    assert rows["beam5"]["mean_iterations"] is None  # beam search: not one step per token
    for name in ("iad", "gs-jacobi"):  # same output as greedy in at most as many iterations
        assert rows[name]["tokens_per_iteration"] >= 1.0
        assert rows[name]["mean_iterations"] <= rows["beam1"]["mean_iterations"]
        assert all(steps >= 1 for steps in rows[name]["iterations"])


def test_markdown_table_has_one_line_per_decoder_and_the_hardware(bench):
    out, result = bench
    text = (out / "t.md").read_text()
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert len(table) == 2 + len(DECODERS)  # header, separator, one line per decoder
    assert [line.split("|")[1].strip() for line in table[2:]] == DECODERS
    header = [cell.strip() for cell in table[0].split("|")[1:-1]]
    assert header[-2:] == ["≠ beam1", "≠ greedy"] and "speedup vs greedy (median / total)" in header
    assert all(len(line.split("|")) == len(table[0].split("|")) for line in table)
    assert "threads: 1" in text and result["hardware"]["torch"] in text and result["hardware"]["cpu"] in text


def test_rows_take_turns_and_report_the_range_of_per_round_speedups(bench):
    """6 sentences at batch 1, default --rounds 10: 6 rounds of one sentence each."""
    out, result = bench
    assert result["settings"]["rounds"] == {"1": 6}
    rows = rows_by_decoder(result)
    for row in result["rows"]:
        assert len(row["round_s"]) == 6 and sum(row["round_s"]) == pytest.approx(row["total_s"])
    assert rows["beam1"]["speedup_vs_greedy_rounds"] == [1.0, 1.0]
    assert rows["greedy"]["speedup_vs_greedy_decoder_rounds"] == [1.0, 1.0]
    low, high = rows["iad"]["speedup_vs_greedy_rounds"]
    assert low <= rows["iad"]["speedup_vs_greedy_total"] <= high  # a weighted mean of the rounds' ratios
    low_lean, high_lean = rows["iad"]["speedup_vs_greedy_decoder_rounds"]
    assert low_lean <= rows["iad"]["speedup_vs_greedy_decoder_total"] <= high_lean
    text = (out / "t.md").read_text()
    assert "Rows take turns in rounds (6 at batch 1)" in text and f"({low:.2f}–{high:.2f})" in text


def test_png_is_written(bench):
    out, _ = bench
    assert (out / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_missing_inputs_are_skipped_with_a_message(reverse_data, tiny_checkpoint, tmp_path, monkeypatch, capsys):
    """No --drafter-path, no ctranslate2 package, sources longer than the max positions."""
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # as if not installed
    argv = harness_args(reverse_data, tiny_checkpoint, "beam1,specdec,specdec++:beta=5,tau=3", tmp_path, 6)
    result = latency.main(argv + ["--max-source-positions", "6"])
    err = capsys.readouterr().err
    lengths = [len(line.split()) + 1 for line in open(reverse_data.parent / "raw" / "test.src")][:6]
    too_long = [i for i, n in enumerate(lengths) if n > 6]
    assert 0 < len(too_long) < 6 and result["settings"]["too_long"] == too_long
    assert f"{len(too_long)} sentences longer than the models' max source positions are not decoded" in err
    assert result["rows"][0]["sentences"] == 6 - len(too_long)
    assert "skipping specdec: needs a block drafter checkpoint: pass --drafter-path" in err
    assert "skipping specdec++:beta=5,tau=3: needs" in err
    assert "CTranslate2 rows skipped: the ctranslate2 package is not installed" in err
    assert [row["decoder"] for row in result["rows"]] == ["beam1"]
    assert [s["decoder"] for s in result["skipped"]] == ["specdec", "specdec++:beta=5,tau=3"]
    assert result["ctranslate2"]["status"] == "skipped"
    text = (tmp_path / "t.md").read_text()
    assert "- specdec: skipped (needs a block drafter" in text and "- CTranslate2: skipped" in text


def test_ctranslate2_greedy_output_is_fairseq_greedy(reverse_data, tiny_checkpoint, tmp_path):
    """The verifier converted with the real ctranslate2 package, a greedy and a beam-5 row per compute type;
    a low length cap so that some outputs end at it (fairseq forces EOS there, CTranslate2 stops)."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    argv = harness_args(reverse_data, tiny_checkpoint, "beam1,beam5", None, 12)
    result = latency.main(argv + ["--max-len-b", "4", "--ct2-dir", str(tmp_path / "ct2"),
                                  "--ct2-compute-types", "float32,int8,float16"])
    supported = ctranslate2.get_supported_compute_types("cpu")
    types = [name for name in ("float32", "int8", "float16") if name in supported]
    assert "float32" in types and result["ctranslate2"] == {
        "status": "ok", "version": ctranslate2.__version__, "compute_types": types,
        **({"unsupported": ["float16"]} if "float16" not in supported else {})}
    rows = {(row["decoder"], row["engine"]): row for row in result["rows"]}
    assert list(rows) == [("beam1", "fairseq"), ("beam5", "fairseq"),
                          *[(f"{beam} {name}", "ctranslate2") for beam in ("beam1", "beam5") for name in types]]
    greedy, ct2_greedy = rows["beam1", "fairseq"], rows["beam1 float32", "ctranslate2"]
    assert 5 in greedy["iterations"]  # 4 tokens + the forced EOS
    assert ct2_greedy["mismatches_vs_greedy"] == 0 and ct2_greedy["bleu"] == greedy["bleu"]
    assert ct2_greedy["iterations"] == greedy["iterations"] and ct2_greedy["sentences"] == 12
    for name in types:
        for beam in ("beam1", "beam5"):
            row = rows[f"{beam} {name}", "ctranslate2"]
            assert row["arithmetic"] == name and 0 <= row["mismatches_vs_greedy"] <= 12 and row["bleu"] is not None
    assert greedy["arithmetic"] == "float32"
    assert (tmp_path / "ct2" / "model.bin").exists()
    # the folder remembers its checkpoint: another file (same bytes, other path) is converted again
    assert (tmp_path / "ct2" / "converted_from.txt").read_text() == ct2.checkpoint_stamp(str(tiny_checkpoint))
    other = tmp_path / "other.pt"
    other.write_bytes(tiny_checkpoint.read_bytes())
    assert ct2.checkpoint_stamp(str(other)) != ct2.checkpoint_stamp(str(tiny_checkpoint))


def test_ctranslate2_compute_types_auto_are_the_supported_ones():
    class FakeModule:
        @staticmethod
        def get_supported_compute_types(device):
            return {"cpu": {"float32", "int8", "int8_float32", "int16"}, "cuda": {"float32", "float16", "int8"}}[device]

    assert ct2.compute_types(FakeModule, "auto", "cpu", False) == (["float32", "int8", "int16"], [])
    assert ct2.compute_types(FakeModule, "auto", "cuda", True) == (["float16", "int8"], [])
    assert ct2.compute_types(FakeModule, "int8, bfloat16,int8", "cpu", False) == (["int8"], ["bfloat16"])


def test_an_unknown_ctranslate2_compute_type_is_a_one_line_error():
    assert ct2.compute_type_problems("auto") == ct2.compute_type_problems("float32, int8") == []
    problems = ct2.compute_type_problems("int8,none")
    assert len(problems) == 1 and "'none' is not a CTranslate2 compute type" in problems[0]
    with pytest.raises(PluginError, match="'int4' is not a CTranslate2 compute type.*--no-ctranslate2"):
        latency.parse_args(["data", "--path", "model.pt", "--ct2-compute-types", "int4"])


def half_number_checkpoint(checkpoint, path):
    """``checkpoint`` with every weight rounded to a float16 number, kept float32 (as export_checkpoint --fp16)."""
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)  # as saved (the test's own file)
    state["model"] = {name: value.half().float() if value.is_floating_point() else value
                      for name, value in state["model"].items()}
    torch.save(state, path)
    return path


def test_arithmetic_cell_names_what_each_row_ran(reverse_data, tiny_checkpoint, tmp_path):
    """Weights that are float16 numbers: the plugin's rows (--verifier-matmul auto) store them as float16 where
    fbgemm can, --verifier-matmul packed and fairseq's own search run float32."""
    from fairseq_plugins.decoding.linears import half_weights_available

    checkpoint = half_number_checkpoint(tiny_checkpoint, tmp_path / "half.pt")
    decoders = "beam1,greedy,greedy:verifier_matmul=packed,bound"
    result = latency.main(harness_args(reverse_data, checkpoint, decoders, None, 3) + ["--no-ctranslate2"])
    cells = {row["decoder"]: row["arithmetic"] for row in result["rows"]}
    lean = arithmetic.FLOAT16_STORED if half_weights_available() else "float32"
    assert cells == {"beam1": "float32", "greedy": lean, "greedy:verifier_matmul=packed": "float32", "bound": lean}


def test_markdown_section_replaces_only_its_own_text(bench, tmp_path):
    """--out-md FILE --md-section NAME: the table between NAME's markers, the prose around it kept; a section
    the file lacks is added at its end; writing it again changes nothing else."""
    _, result = bench
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\nProse before.\n\n<!-- bench:a -->\nold table\n<!-- /bench:a -->\n\nProse after.\n")
    report.write_all(result, str(doc), None, None, md_section="a")
    report.write_all(result, str(doc), None, None, md_section="b")
    text = doc.read_text()
    assert text.startswith("# Benchmarks\n\nProse before.\n\n<!-- bench:a -->\n**Hardware:**")
    assert "old table" not in text and "# Decoding latency" not in text
    section_a, after = text.split("<!-- bench:a -->\n")[1].split("<!-- /bench:a -->")
    assert after.startswith("\n\nProse after.\n\n<!-- bench:b -->\n") and text.endswith("<!-- /bench:b -->\n")
    table = [line for line in section_a.splitlines() if line.startswith("|")]
    assert [line.split("|")[1].strip() for line in table[2:]] == DECODERS
    report.write_all(result, str(doc), None, None, md_section="a")
    assert doc.read_text() == text
    fresh = tmp_path / "new.md"
    report.write_all(result, str(fresh), None, None, md_section="a")
    assert fresh.read_text() == "<!-- bench:a -->\n" + section_a + "<!-- /bench:a -->\n"


def test_ctranslate2_rejects_a_model_that_is_not_a_transformer_in_one_line():
    ctranslate2 = pytest.importorskip("ctranslate2")
    with pytest.raises(ValueError, match="CTranslate2 converts fairseq transformers, not Linear") as error:
        ct2.transformer_spec(ctranslate2, torch.nn.Linear(2, 2))
    assert ct2.reason(error.value) == "ValueError: CTranslate2 converts fairseq transformers, not Linear"
    assert ct2.reason(RuntimeError("first line\nsecond line")) == "RuntimeError: first line"


def test_decoder_specs():
    assert split_specs("beam1,specdec++:beta=5,tau=3,iad") == ["beam1", "specdec++:beta=5,tau=3", "iad"]
    specs = parse_decoders("beam5,specdec++:beta=5,tau=3,gs-jacobi:block=4", decoder_names())
    assert [(s.decoding, s.beam) for s in specs] == [("beam", 5), ("specdec++", 1), ("gs-jacobi", 1)]
    assert specs[1].options == {"beta": 5, "tau": 3} and specs[2].options == {"block_size": 4}
    for bad, message in (("fastest", "unknown decoder 'fastest'"), ("beta=5,iad", "does not follow"),
                         ("iad:speed=2", "bad option"), ("iad,iad", "listed twice"),
                         ("specdec:draft_length=often", "draft_length: Invalid value 'often'"),
                         ("oracle:k=ten", "block_size: Value 'ten' could not be converted"),
                         ("bound:verifier_matmul=fp8", "verifier_matmul: Invalid value 'fp8'")):
        with pytest.raises(PluginError, match=message):
            parse_decoders(bad, decoder_names())


def test_option_errors_and_percentile():
    with pytest.raises(PluginError, match="--fp16 needs --device cuda"):
        latency.parse_args(["data", "--path", "x.pt", "--fp16"])
    with pytest.raises(PluginError, match="--batch-sizes"):
        latency.parse_args(["data", "--path", "x.pt", "--batch-sizes", "1,x"])
    with pytest.raises(PluginError, match="--md-section needs --out-md"):
        latency.parse_args(["data", "--path", "x.pt", "--md-section", "demo"])
    with pytest.raises(PluginError, match="--md-section: letters, digits"):
        latency.parse_args(["data", "--path", "x.pt", "--out-md", "d.md", "--md-section", "a b"])
    assert percentile([1, 2, 3, 4, 5], 50) == 3 and percentile([1, 2, 3, 4, 5], 90) == pytest.approx(4.6)


def failed_harness_run(data, checkpoint, *args):
    """stderr of a harness run that must fail with one error line (no traceback)."""
    proc = subprocess.run([sys.executable, "-m", "fairseq_plugins.bench.latency", str(data), "--path", str(checkpoint),
                           *args], text=True, capture_output=True, timeout=300)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.stderr


@pytest.mark.slow
def test_every_decoder_skipped_is_one_line(reverse_data, tiny_checkpoint):
    """Only specdec asked for, and no drafter: an error, not a run of CTranslate2's rows alone."""
    stderr = failed_harness_run(reverse_data, tiny_checkpoint, "--gen-subset", "test", "--decoders", "specdec")
    assert "nothing to time: specdec needs a block drafter checkpoint" in stderr


@pytest.mark.slow
def test_a_split_the_data_lacks_is_one_line(reverse_data, tiny_checkpoint):
    stderr = failed_harness_run(reverse_data, tiny_checkpoint, "--gen-subset", "tset", "--decoders", "beam1")
    assert stderr.strip().splitlines()[-1] == (
        f"latency: error: --gen-subset tset: Dataset not found: tset ({reverse_data})")


@pytest.mark.slow
def test_a_missing_data_folder_is_one_line(tiny_checkpoint, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "fairseq_plugins.bench.latency", str(tmp_path / "nowhere"), "--path",
                           str(tiny_checkpoint), "--decoders", "beam1"], text=True, capture_output=True, timeout=300)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1].startswith(f"latency: error: data folder not found: {tmp_path / 'nowhere'}")


@pytest.mark.slow
def test_recipe_and_module_entry_point(reverse_data, tiny_checkpoint, tmp_path):
    env = {**os.environ, "PATH": os.pathsep.join([str(BIN_DIR), os.environ["PATH"]]), "OMP_NUM_THREADS": "1",
           "DATA": str(reverse_data), "CHECKPOINT": str(tiny_checkpoint), "SRC": "src", "TGT": "tgt",
           "DECODERS": "beam1,gs-jacobi", "MAX_SENTENCES": "3", "WARMUP": "1", "REMOVE_BPE": "none",
           "BATCH_SIZES": "1 2",  # as the other benchmark recipes take it (or 1,2)
           "OUT_DIR": str(tmp_path), "PYTHON": sys.executable}
    proc = subprocess.run(["bash", str(REPO / "recipes" / "benchmark-latency.sh"), "--max-len-b", "10",
                           "--no-progress-bar"], env=env, cwd=REPO, text=True, capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    md = proc.stdout.strip().splitlines()[-1]
    assert md == str(tmp_path / "latency-test-cpu-fp32-batch1_2.md")
    assert os.path.exists(md.replace(".md", ".png")) and os.path.exists(md.replace(".md", ".json"))
    assert "| gs-jacobi | 1 |" in open(md).read() and "| gs-jacobi | 2 |" in open(md).read()


def test_help_lists_the_options(capsys):
    with pytest.raises(SystemExit) as exit_info:
        latency.main(["--help"])
    assert exit_info.value.code == 0
    help_text = capsys.readouterr().out
    for option in ("--decoders", "--drafter-path", "--batch-sizes", "--warmup", "--threads", "--remove-bpe",
                   "--out-md", "--md-section", "--out-png", "--out-json", "--max-sentences", "--device", "--fp16",
                   "--ct2-compute-types"):
        assert option in help_text
