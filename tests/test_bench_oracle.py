"""Latency harness reference rows and profiling: ``oracle`` (the core with a drafter that
drafts the greedy output), ``bound`` (encoder + one teacher-forced block through the lean
verifier cache), ``--profile`` (one iteration split into encoder / drafter / verifier /
accept, in greedy steps), and fairseq's length options reaching every row."""
import json
import math
from types import SimpleNamespace

import pytest
import torch

from fairseq_plugins.bench import latency
from fairseq_plugins.bench.decoders import parse_decoders
from fairseq_plugins.bench.oracle import OracleDrafter
from fairseq_plugins.bench.profile import ProfilePass, summarize
from fairseq_plugins.decoding import linears
from fairseq_plugins.decoding.drafters import BatchStart
from fairseq_plugins.decoding.registry import decoder_names
from fairseq_plugins_compat.errors import PluginError

DECODERS = ["iad", "beam1", "beam5", "oracle", "oracle:k=3", "bound"]  # beam1 not first: it runs first anyway
PROFILED = ["iad", "oracle", "oracle:k=3"]
SENTENCES = 8
MAX_LEN = 30  # output tokens before EOS (--max-len-b)


def harness(data, checkpoint, decoders, *extra, out=None):
    argv = [str(data), "--path", str(checkpoint), "--decoders", ",".join(decoders), "--max-sentences",
            str(SENTENCES), "--warmup", "2", "--no-progress-bar", "--no-ctranslate2", "--max-len-b", "20", *extra]
    if out is not None:
        argv += ["--out-md", str(out / "t.md"), "--out-json", str(out / "t.json")]
    return latency.main(argv)


@pytest.fixture(scope="module")
def profiled(reverse_data, tiny_checkpoint, tmp_path_factory):
    """One harness run with the reference rows and --profile; (output folder, JSON written)."""
    out = tmp_path_factory.mktemp("oracle")
    harness(reverse_data, tiny_checkpoint, DECODERS, "--profile", out=out)
    with open(out / "t.json") as f:
        return out, json.load(f)


def rows_by_decoder(result):
    return {row["decoder"]: row for row in result["rows"]}


def test_rows_keep_the_listed_order(profiled):
    assert [row["decoder"] for row in profiled[1]["rows"]] == DECODERS


def test_oracle_output_is_greedy_in_the_fewest_iterations(profiled):
    rows = rows_by_decoder(profiled[1])
    greedy = rows["beam1"]
    for label, k in (("oracle", 10), ("oracle:k=3", 3)):
        row = rows[label]
        assert row["mismatches_vs_greedy"] == 0 and row["bleu"] == greedy["bleu"]
        # every iteration accepts k drafted tokens + the verifier's own: ceil(tokens / (k + 1))
        assert row["iterations"] == [math.ceil(n / (k + 1)) for n in greedy["iterations"]]
        assert row["mean_iterations"] < greedy["mean_iterations"]
    assert rows["oracle"]["mean_iterations"] <= rows["oracle:k=3"]["mean_iterations"]


def test_bound_row_takes_one_iteration_per_sentence(profiled):
    rows = rows_by_decoder(profiled[1])
    greedy, bound = rows["beam1"], rows["bound"]
    assert bound["iterations"] == [1] * SENTENCES and bound["output_lengths"] == greedy["output_lengths"]
    assert bound["tokens_per_iteration"] == pytest.approx(greedy["mean_iterations"])
    assert bound["total_s"] > 0 and all(ms > 0 for ms in bound["latencies_ms"])


def test_bound_is_one_lean_verifier_block_that_chooses_the_greedy_output(reverse_data, tiny_checkpoint):
    """Per batch the bound feeds the whole greedy output to the lean verifier cache as ONE block; teacher-forced,
    the verifier's choice after each prefix is greedy's next token (a pass on other positions, another cache or
    another model would not choose it)."""
    from fairseq_plugins.bench import fairseq_engine
    from fairseq_plugins.bench.oracle import TeacherForcedBound
    from fairseq_plugins.decoding.incremental import VerifierCache

    cfg = fairseq_engine.fairseq_config(str(reverse_data), str(tiny_checkpoint), "test", "cpu", False, None,
                                        ["--max-len-b", str(MAX_LEN)])
    engine = fairseq_engine.FairseqEngine(cfg, "cpu", False)
    batches = engine.batches(list(range(SENTENCES)), 3)
    beam1 = engine.build_generator(parse_decoders("beam1", decoder_names())[0], None)
    greedy = {i: hypos[0]["tokens"].tolist() for batch in batches
              for i, hypos in zip(batch.ids, engine.runner(beam1)(batch))}
    bound = TeacherForcedBound(engine)
    blocks = []

    class CountingCache(VerifierCache):
        def forward_block(self, tokens):
            blocks.append(tuple(tokens.shape))
            return super().forward_block(tokens)

    bound.generator.cache_factory = CountingCache
    run, pad = bound.runner(), engine.tgt_dict.pad()
    for batch in bound.batches(batches, greedy):
        lprobs = run(batch).clone()
        lprobs[..., pad] = -math.inf  # never chosen (fairseq's limits)
        for row, i in enumerate(batch.ids):
            chosen = greedy[i] if len(greedy[i]) <= MAX_LEN else greedy[i][:-1]  # fairseq forces EOS at the cap
            assert lprobs[row, : len(chosen)].argmax(-1).tolist() == chosen
    assert any(len(tokens) <= MAX_LEN for tokens in greedy.values())  # some end by the verifier's own EOS
    assert blocks == [(len(batch.ids), max(len(greedy[i]) for i in batch.ids)) for batch in batches]


def test_profile_summary_counts_seconds_in_greedy_steps_per_iteration():
    """The units behind the profile table, from given timings (no clock): a greedy step is beam1's total time over
    its decoder steps (per batch, its longest output), every section and the pass are per profiled iteration."""
    batches = [SimpleNamespace(ids=[0]), SimpleNamespace(ids=[1])]
    greedy = {"ids": [0, 1], "iterations": [6, 4], "total_s": 0.5}  # 10 steps: 50 ms a step
    timed = {"iterations": [2, 3], "total_s": 0.6}
    found = ProfilePass("specdec", 1, total_s=0.7, iterations=5,
                        seconds={"encoder": 0.05, "drafter": 0.1, "verifier": 0.4, "accept": 0.05})
    entry = summarize(found, timed, greedy, batches)  # an iteration: 5 x 50 ms = 0.25 s
    expected = {"greedy_step_ms": 50.0, "iterations": 5, "greedy_steps_per_iteration": 2.0, "encoder": 0.2,
                "drafter": 0.4, "verifier": 1.6, "accept": 0.2, "other": 0.4, "profiled": 2.8, "measured": 2.4}
    assert {name: entry[name] for name in expected} == pytest.approx(expected)


def test_profile_splits_one_iteration_into_its_parts(profiled):
    _, result = profiled
    rows = rows_by_decoder(result)
    entries = {entry["decoder"]: entry for entry in result["profile"]}
    assert list(entries) == PROFILED  # beamN and bound are not profiled
    greedy = rows["beam1"]
    for label, entry in entries.items():
        parts = [entry[name] for name in ("encoder", "drafter", "verifier", "accept")]
        assert all(part > 0 for part in parts) and entry["other"] >= 0, entry  # the sections lie within the pass
        assert sum(parts) + entry["other"] == pytest.approx(entry["profiled"])
        assert entry["iterations"] == sum(rows[label]["iterations"])  # batch size 1: per sentence
        assert entry["greedy_step_ms"] == pytest.approx(1000 * greedy["total_s"] / sum(greedy["iterations"]))
        # the identity behind the table: speedup vs greedy (total) = greedy steps per iteration / measured
        speedup = entry["greedy_steps_per_iteration"] / entry["measured"]
        assert speedup == pytest.approx(rows[label]["speedup_vs_greedy_total"])
    assert entries["oracle"]["greedy_steps_per_iteration"] > entries["oracle:k=3"]["greedy_steps_per_iteration"]


def test_profile_table_in_the_markdown(profiled):
    out, _ = profiled
    text = (out / "t.md").read_text()
    assert "**Cost of one iteration (greedy steps)**" in text
    table = [line for line in text.split("**Cost of one iteration")[1].splitlines() if line.startswith("|")]
    assert [line.split("|")[1].strip() for line in table[2:]] == PROFILED


def test_max_len_options_reach_every_row(reverse_data, tiny_checkpoint, profiled):
    """--max-len-a/--max-len-b go to fairseq's parser and cap fairseq's beams, the plugin's decoders
    and the oracle alike (at most a * source length + b tokens, EOS excluded; source with EOS)."""
    result = harness(reverse_data, tiny_checkpoint, ["beam1", "beam5", "iad", "oracle", "bound"],
                     "--max-len-a", "0.5", "--max-len-b", "1")
    assert result["settings"]["fairseq_args"][-4:] == ["--max-len-a", "0.5", "--max-len-b", "1"]
    sources = [line.split() for line in open(reverse_data.parent / "raw" / "test.src")]
    uncapped = rows_by_decoder(profiled[1])["beam1"]["output_lengths"]
    for row in result["rows"]:
        caps = [int(0.5 * (len(sources[i]) + 1) + 1) for i in row["ids"]]
        assert all(n <= cap for n, cap in zip(row["output_lengths"], caps)), row["decoder"]
        assert sum(row["output_lengths"]) < sum(uncapped), row["decoder"]
    assert rows_by_decoder(result)["oracle"]["mismatches_vs_greedy"] == 0


@pytest.mark.skipif(not linears.row_int8_available(), reason="no fbgemm int8 kernels (x86 CPU)")
def test_reference_rows_take_the_verifiers_products(reverse_data, tiny_checkpoint, monkeypatch):
    """oracle:verifier_matmul=int8 and bound:verifier_matmul=int8 run the int8 verifier of greedy:verifier_matmul=int8
    (every weight int8 here: the tiny model's are below the usual size threshold); the oracle gives that verifier's
    greedy output, the bound times it over beam1's output (what it replays)."""
    monkeypatch.setattr(linears, "ROW_INT8_MIN_ELEMENTS", 0)
    rows = rows_by_decoder(harness(reverse_data, tiny_checkpoint, [
        "beam1", "greedy:verifier_matmul=int8", "oracle:verifier_matmul=int8", "bound:verifier_matmul=int8", "oracle"]))
    int8 = rows["greedy:verifier_matmul=int8"]
    assert int8["arithmetic"].startswith("int8 weights") and rows["oracle"]["arithmetic"] != int8["arithmetic"]
    for label in ("oracle:verifier_matmul=int8", "bound:verifier_matmul=int8"):
        assert rows[label]["arithmetic"] == int8["arithmetic"], label
    assert rows["oracle:verifier_matmul=int8"]["outputs"] == int8["outputs"] != rows["beam1"]["outputs"]
    assert rows["bound:verifier_matmul=int8"]["outputs"] == rows["beam1"]["outputs"]


@pytest.mark.parametrize("decoders, extra, message", [
    ("oracle,iad", [], "oracle: need beam1 in --decoders (they replay its greedy outputs)"),
    ("beam5,bound,oracle:k=3", [], "bound, oracle:k=3: need beam1"),
    ("beam5,iad", ["--profile"], "--profile needs beam1 in --decoders"),
    ("beam1,beam5,bound", ["--profile"], "--profile: no decoder in --decoders has iterations to profile"),
    ("beam1,oracle:k=0", [], "k must be an integer >= 1"),
    ("beam1,bound:k=3", [], "bad option 'k=3'"),
    ("beam1,oracle:beta=2", [], "keys of oracle: b, block, block_size, k, verifier_matmul"),
])
def test_bad_combinations_are_one_line_errors(decoders, extra, message, monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["latency", "data", "--path", "x.pt", "--decoders", decoders, *extra])
    with pytest.raises(SystemExit) as exit_info:
        latency.cli_main()
    text = capsys.readouterr().err
    assert exit_info.value.code == 1
    assert text.startswith("latency: error: ") and message in text and text.count("\n") == 1


def test_reference_specs():
    specs = parse_decoders("beam1,oracle,oracle:k=4,bound", decoder_names())
    assert [(s.decoding, s.options, s.replays_greedy) for s in specs[1:]] == [
        ("oracle", {}, True), ("oracle", {"block_size": 4}, True), ("bound", {}, True)]
    assert not specs[0].replays_greedy
    with pytest.raises(PluginError, match="choose from .*oracle, bound"):
        parse_decoders("orakel", decoder_names())


def test_oracle_drafter_drafts_the_greedy_continuation():
    pad, eos = 1, 2
    targets = {(5, 6, eos): torch.tensor([7, 8, 9, eos]), (5, eos): torch.tensor([4, eos])}
    drafter = OracleDrafter(targets, src_pad=pad, tgt_pad=pad)
    src = torch.tensor([[5, 6, eos], [pad, 5, eos]])  # left-padded, as fairseq collates sources
    drafter.start(BatchStart(src, torch.tensor([3, 2]), 10, {}))
    tokens = torch.tensor([[eos, 7, pad, pad], [eos, pad, pad, pad]])
    assert drafter.propose(tokens, torch.tensor([2, 1]), 3).tolist() == [[8, 9, eos], [4, eos, pad]]
    drafter.keep_rows(torch.tensor([0]))
    assert drafter.propose(tokens[:1], torch.tensor([4]), 2).tolist() == [[eos, pad]]
    with pytest.raises(PluginError, match="oracle: no greedy output for a source sentence"):
        drafter.start(BatchStart(torch.tensor([[9, eos]]), torch.tensor([2]), 10, {}))


def test_help_documents_profile_and_length_options(capsys):
    with pytest.raises(SystemExit):
        latency.main(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for text in ("--profile", "--max-len-a A --max-len-b B", "oracle[:k=10]", "need beam1 in --decoders"):
        assert text in help_text
