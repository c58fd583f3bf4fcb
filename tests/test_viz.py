"""Visualisations: the draft/verify trace (text, HTML) and DDGviz (grid data, PNG, SVG),
on tiny random models with scripted drafters, and both commands on a trained checkpoint."""
import json
import math
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from fairseq.sequence_generator import SequenceGenerator

import drafter_helpers
from conftest import run_cli
from fairseq_plugins.decoding.core import SpeculativeConfig, SpeculativeGenerator
from fairseq_plugins.decoding.drafters import Drafter
from fairseq_plugins.decoding.iad import SourceCopyDrafter
from fairseq_plugins.decoding.jacobi import JacobiDrafter
from fairseq_plugins.decoding.specdec import BlockDrafter
from fairseq_plugins.decoding.stats import DecodingStats
from fairseq_plugins.viz import ddgviz, trace
from fairseq_plugins.viz.runner import decoder_choices, enable_trace, traced_decode
from fairseq_plugins.viz.steps import Symbols, view_steps
from fairseq_plugins_compat.errors import PluginError
from tiny_models import build_transformer, make_batch, make_dictionary

DICT = make_dictionary(12)
PAD, EOS = DICT.pad(), DICT.eos()
SYMBOLS = Symbols(DICT)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class ScriptedDrafter(Drafter):
    """Drafts the known ``target`` (batch of one), with ``wrong`` at position ``at`` the
    first time that position is drafted."""

    def __init__(self, target, at=None, wrong=None):
        self.target, self.at, self.wrong, self.spoiled = list(target), at, wrong, False

    def propose(self, tokens, lengths, k):
        done = int(lengths[0]) - 1
        draft = self.target[done: done + k]
        if self.at is not None and not self.spoiled and done <= self.at < done + len(draft):
            draft[self.at - done], self.spoiled = self.wrong, True
        return tokens.new_tensor([draft]).view(1, len(draft))


@pytest.fixture(scope="module")
def model():
    return build_transformer(DICT, seed=5, eos_boost=0.3)


@pytest.fixture(scope="module")
def batch():
    """One sentence whose greedy output (10 tokens) ends before the max length."""
    full = make_batch(DICT, [5, 7, 3], seed=5)
    return {"id": full["id"][1:2], "net_input": {k: v[1:2] for k, v in full["net_input"].items()}}


def greedy(model, batch):
    return SequenceGenerator([model], DICT, beam_size=1, max_len_b=16).generate([model], batch)


def traced(model, batch, drafter, **cfg):
    generator = SpeculativeGenerator(model, DICT, drafter, SpeculativeConfig(max_len_b=16, **cfg), DecodingStats())
    return traced_decode(generator, batch)


def names(tokens):
    return " ".join(SYMBOLS.many(tokens))


def iteration_lines(text, index):
    """The header, D and V lines of iteration ``index`` in a text trace."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(f"ITERATION {index} "))
    return lines[at], lines[at + 1], lines[at + 2]


def block_tokens(line):
    """The drafted or verified tokens of a D or V line (after the prefix and its '|')."""
    return line[5:].rpartition("|")[2].split()


def test_trace_of_a_perfect_drafter_is_one_iteration_without_bifurcation(model, batch):
    target = greedy(model, batch)[0][0]["tokens"].tolist()
    assert len(target) == 10
    [sentence] = traced(model, batch, ScriptedDrafter(target), block_size=len(target))
    assert sentence.output == target and len(sentence.steps) == 1
    text = trace.trace_text([sentence], SYMBOLS)
    header, d_line, v_line = iteration_lines(text, 1)
    assert header == f"ITERATION 1  +{len(target)} tokens  {len(target)}/{len(target)} drafts accepted"
    assert d_line == f"  D  {names(target)}"
    assert v_line.startswith(f"  V  {names(target)} ~") and v_line.count("~") == 2  # the one past EOS
    assert "[" not in d_line.replace("[EOS]", "") and f"RESULT  {names(target[:-1])}" in text


def test_trace_shows_the_bifurcation_where_the_draft_is_wrong(model, batch):
    target = greedy(model, batch)[0][0]["tokens"].tolist()
    wrong = next(t for t in range(DICT.nspecial, len(DICT)) if t != target[2])
    [sentence] = traced(model, batch, ScriptedDrafter(target, at=2, wrong=wrong), block_size=len(target))
    assert sentence.output == target and [s.gained for s in sentence.steps] == [3, len(target) - 3]
    text = trace.trace_text([sentence], SYMBOLS)
    header, d_line, v_line = iteration_lines(text, 1)
    assert header == f"ITERATION 1  +3 tokens  2/{len(target)} drafts accepted  bifurcation at draft 3"
    discarded = " ".join(f"~{t}~" for t in SYMBOLS.many(target[3:]))
    assert d_line == f"  D  {names(target[:2])} [{SYMBOLS(wrong)}] {discarded}"
    verified = v_line.split()[1:]
    assert verified[:3] == [*SYMBOLS.many(target[:2]), f"[{SYMBOLS(target[2])}]"]
    assert len(verified) == len(target) + 1 and all(re.fullmatch(r"~.+~", t) for t in verified[3:])
    header, d_line, v_line = iteration_lines(text, 2)
    assert header.startswith(f"ITERATION 2  +{len(target) - 3} tokens")
    assert d_line == f"  D  {names(target[:3])} | {names(target[3:])}"  # the prefix, then the drafts
    assert v_line.startswith(f"  V  {names(target[:3])} | {names(target[3:])} ~")


def test_trace_marks_drafts_accepted_by_the_specdec_plus_plus_relaxation(model, batch):
    target = greedy(model, batch)[0][0]["tokens"].tolist()
    wrong = next(t for t in range(DICT.nspecial, len(DICT)) if t != target[2])
    drafter = ScriptedDrafter(target, at=2, wrong=wrong)
    [sentence] = traced(model, batch, drafter, block_size=len(target), beta=len(DICT), tau=1e4)
    assert sentence.output == target[:2] + [wrong] + target[3:] and len(sentence.steps) == 1
    text = trace.trace_text([sentence], SYMBOLS)
    header, d_line, v_line = iteration_lines(text, 1)
    assert d_line.split()[1:4] == [*SYMBOLS.many(target[:2]), f"{{{SYMBOLS(wrong)}}}"]
    assert v_line.split()[3] == SYMBOLS(target[2])  # the verifier preferred the greedy token
    assert "relaxed: 3" in header and "bifurcation" not in header


def test_html_trace_has_one_row_per_iteration_and_no_external_assets(model, batch):
    sentences = traced(model, batch, JacobiDrafter(PAD, PAD, block=3), block_size=3)
    target = greedy(model, batch)[0][0]["tokens"].tolist()
    wrong = next(t for t in range(DICT.nspecial, len(DICT)) if t != target[2])
    sentences += traced(model, batch, ScriptedDrafter(target, at=2, wrong=wrong), block_size=len(target))
    page = trace.trace_html(sentences, SYMBOLS, title="test")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>") and "<style>" in page
    assert not re.search(r"(src|href)=|@import|url\(", page)
    tables = page.split('<table class="trace">')[1:]
    assert [t.count('<tr class="iteration">') for t in tables] == [len(s.steps) for s in sentences]
    assert tables[1].count('class="tok bifurcation"') == 2  # the wrong draft and the verifier's fix
    assert '<span class="tok prefix">' in tables[1]


SPECULATIVE = {  # name -> (drafter factory(dictionary, drafter model), block size, beta, tau)
    "specdec": (lambda d, m: BlockDrafter(m), 4, 1, 0.0),
    "specdec++": (lambda d, m: BlockDrafter(m), 4, 5, 3.0),
    "iad": (lambda d, m: SourceCopyDrafter(d.pad()), 64, 1, 0.0),
    "jacobi": (lambda d, m: JacobiDrafter(d.pad(), d.pad()), 64, 1, 0.0),
}


@pytest.mark.parametrize("name", sorted(SPECULATIVE))
def test_trace_of_every_speculative_decoder_is_consistent(name):
    """The text trace has one D and one V line per iteration, of the drafted and verified
    lengths; accepted drafts are the output; relaxed drafts obey SpecDec++'s tau rule."""
    dictionary = drafter_helpers.make_dictionary(20)
    verifier = drafter_helpers.build_verifier(dictionary, seed=1)
    factory, block_size, beta, tau = SPECULATIVE[name]
    drafter = factory(dictionary, drafter_helpers.build_drafter(dictionary, seed=2))
    cfg = SpeculativeConfig(block_size=block_size, beta=beta, tau=tau, max_len_b=12)
    generator = SpeculativeGenerator(verifier, dictionary, drafter, cfg, DecodingStats())
    sentences = traced_decode(generator, make_batch(dictionary, [5, 8, 3], seed=1))
    symbols, relaxed = Symbols(dictionary), 0
    for sentence in sentences:
        text = trace.trace_text([sentence], symbols)
        for view in view_steps(sentence):
            header, d_line, v_line = iteration_lines(text, view.index)
            assert len(block_tokens(d_line)) == len(view.drafts) and len(block_tokens(v_line)) == len(view.choices)
            assert view.drafts[: view.accepted] == sentence.output[view.start: view.start + view.accepted]
            if view.bifurcation is not None:
                assert f"[{symbols(view.choices[view.bifurcation])}]" in v_line
                assert sentence.output[view.start + view.bifurcation] == view.choices[view.bifurcation]
            for j in view.relaxed:
                relaxed += 1
                assert math.log(view.step.draft_probs[j]) >= math.log(view.step.choice_probs[j]) - tau - 1e-9
        assert sum(s.gained for s in sentence.steps) == len(sentence.output)
    assert (relaxed > 0) == (name == "specdec++")


@pytest.mark.parametrize("block", [None, 3])
def test_ddgviz_grid_matches_greedy_decoding(model, block):
    """Rows = iterations; final positions grow; final cells carry greedy's tokens and
    the probabilities of fairseq's positional scores."""
    batch = make_batch(DICT, [5, 7, 3], seed=5)
    reference = greedy(model, batch)
    sentences = traced(model, batch, JacobiDrafter(PAD, PAD, block=block), block_size=block or 64)
    assert sorted(len(s.output) for s in sentences) == [3, 10, 17]
    for sentence, ref in zip(sentences, reference):
        grid = ddgviz.ddg_grid(sentence, SYMBOLS)
        output = ref[0]["tokens"].tolist()
        assert sentence.output == output
        assert grid.status.shape == grid.probs.shape == (len(sentence.steps), len(output))
        assert len(grid.tokens) == len(sentence.steps)
        assert grid.output == SYMBOLS.many(output)
        assert all(a <= b for a, b in zip(grid.final_counts, grid.final_counts[1:])) and grid.final_counts[-1] == len(output)
        shown = grid.probs[~np.isnan(grid.probs)]
        assert ((shown >= 0) & (shown <= 1)).all()
        expected_probs = ref[0]["positional_scores"].exp().tolist()
        for i, row in enumerate(grid.status):
            n_final = grid.final_counts[i]
            assert (row[:n_final] >= ddgviz.NEW_FINAL).all() and (row[n_final:] <= ddgviz.PREDICTED).all()
            assert (row == ddgviz.NEW_FINAL).sum() == sentence.steps[i].gained
            assert grid.tokens[i][:n_final] == SYMBOLS.many(output[:n_final])
            assert grid.probs[i, :n_final] == pytest.approx(expected_probs[:n_final], rel=1e-5, abs=1e-6)
        if block and len(output) > 2 * block:  # GS-Jacobi: nothing predicted past the current block
            assert (grid.status[block] == ddgviz.EMPTY).any()


def test_ddgviz_writes_valid_png_svg_and_json_data(model, batch, tmp_path):
    [sentence] = traced(model, batch, JacobiDrafter(PAD, PAD), block_size=64)
    grid = ddgviz.ddg_grid(sentence, SYMBOLS)
    png, svg = ddgviz.save_figure(grid, str(tmp_path / "sub" / "ddg"), title="tiny")
    data = open(png, "rb").read()
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width > 200 and height > 100
    root = ET.parse(svg).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    texts = "".join(root.itertext())
    assert "[EOS]" in texts and grid.output[0] in texts and "tiny" in texts  # tokens kept as SVG text
    data = json.loads(json.dumps(grid.to_json()))
    assert data["iterations"] == len(sentence.steps) and data["positions"] == len(sentence.output)
    assert all(p is None or 0 <= p <= 1 for row in data["probs"] for p in row)


def test_only_speculative_generators_can_be_traced(model):
    with pytest.raises(PluginError, match="no draft/verify loop"):
        enable_trace(SequenceGenerator([model], DICT, beam_size=1))


def test_command_line_help_lists_the_options():
    for module in (trace, ddgviz):
        text = module.get_parser().format_help()
        for option in ("--path", "--drafter-path", "--decoding", "--block-size", "--beta", "--tau",
                       "--ids", "--input", "--out"):
            assert option in text
    choices = decoder_choices()
    assert {"specdec", "specdec++", "iad", "jacobi", "gs-jacobi", "hybrid-jacobi"} <= set(choices)
    assert "beam" not in choices and "drafter-only" not in choices


@pytest.mark.slow
def test_commands_on_a_trained_checkpoint(reverse_data, tiny_checkpoint, tmp_path):
    out = tmp_path / "viz" / "trace"
    common = [reverse_data, "--path", tiny_checkpoint, "--cpu", "--max-len-b", 20]
    run_cli("python", "-m", "fairseq_plugins.viz.trace", *common, "--decoding", "gs-jacobi", "--block-size", 3,
            "--ids", 0, 5, "--out", out)
    text = (tmp_path / "viz" / "trace.txt").read_text()
    page = (tmp_path / "viz" / "trace.html").read_text()
    headers = re.findall(r"^ITERATION (\d+) ", text, re.M)
    assert text.count("SENTENCE ") == 2 and re.search(r"^SENTENCE 5$", text, re.M)
    assert page.count('<tr class="iteration">') == len(headers) > 0
    drafted = [len(block_tokens(line)) for line in re.findall(r"^  D\b.*$", text, re.M)]
    verified = [len(block_tokens(line)) for line in re.findall(r"^  V\b.*$", text, re.M)]
    assert len(drafted) == len(verified) == len(headers)
    assert all(v == d + 1 and d <= 2 for d, v in zip(drafted, verified))  # GS-Jacobi blocks of 3
    source = "w1 w2 w3 w4"
    run_cli("python", "-m", "fairseq_plugins.viz.ddgviz", *common, "--decoding", "jacobi", "--input", source,
            "-s", "src", "-t", "tgt", "--out", tmp_path / "ddg")  # fairseq's short language options
    grid = json.loads((tmp_path / "ddg.input0.json").read_text())
    assert grid["source"] == source and grid["iterations"] == len(grid["status"]) == len(grid["final_counts"])
    assert grid["final_counts"] == sorted(grid["final_counts"]) and grid["final_counts"][-1] == grid["positions"]
    assert grid["output"][-1] == "[EOS]" and all(p is None or 0 <= p <= 1 for row in grid["probs"] for p in row)
    assert (tmp_path / "ddg.input0.png").read_bytes()[:8] == PNG_MAGIC
    assert ET.parse(tmp_path / "ddg.input0.svg").getroot().tag == "{http://www.w3.org/2000/svg}svg"


@pytest.mark.parametrize("module", [trace, ddgviz])
def test_bad_input_is_a_one_line_error(reverse_data, tiny_checkpoint, tmp_path, capsys, module):
    cases = [(["--path", tiny_checkpoint, "--ids", 999], "unknown sentence id 999: --gen-subset test has ids 0..23"),
             (["--path", tiny_checkpoint, "--ids", 0, "--gen-subset", "tset"],
              f"--gen-subset tset: Dataset not found: tset ({reverse_data})"),
             (["--path", tmp_path / "missing.pt", "--ids", 0], "no such checkpoint file"),
             (["--path", tiny_checkpoint, "--input", " ".join(["w1"] * 1100)],
              "sentence input0: 1101 source tokens, more than the models' max source positions (1024)")]
    for options, message in cases:
        with pytest.raises(SystemExit) as exit_info:
            module.cli_main([str(reverse_data), *map(str, options), "--decoding", "iad", "--out", str(tmp_path / "x")])
        err = capsys.readouterr().err
        assert exit_info.value.code == 1 and message in err and len(err.strip().splitlines()) == 1
    with pytest.raises(SystemExit) as exit_info:
        module.cli_main([str(tmp_path / "nowhere"), "--path", str(tiny_checkpoint), "--ids", "0", "--out", "x"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 1 and f"data folder not found: {tmp_path / 'nowhere'}" in err, err
    with pytest.raises(SystemExit) as exit_info:
        module.cli_main([str(reverse_data), "--path", "x.pt", "--ids", "0", "--input", "w1", "--out", "x"])
    assert exit_info.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
