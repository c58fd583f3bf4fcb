"""Everything about a decoder is derived from its registry entry: ``--help``, fairseq-generate,
the latency harness, and parity with ``--beam 1`` for every greedy-equivalent entry
(including ``repeat-last``, defined only in tests/decoders/repeat_last.py)."""
import json

import pytest

from conftest import PLUGIN_DIR, REPO, run_cli
from fairseq_plugins.decoding.registry import DECODERS, benchmark_specs, entries, option_aliases
from test_cli_end_to_end import hypotheses

PLUGIN = ["--user-dir", PLUGIN_DIR, "--task", "speculative_translation"]
GREEDY_EQUIVALENT = [entry.name for entry in entries() if entry.greedy_equivalent]


def test_test_suite_decoder_is_registered_with_its_options():
    assert "repeat-last" in DECODERS and "repeat-last" in GREEDY_EQUIVALENT
    assert option_aliases()["repeat_default_k"] == "repeat_default_k"
    assert "repeat-last" in benchmark_specs() and "specdec++:beta=5,tau=3" in benchmark_specs()


@pytest.mark.slow
def test_help_lists_every_decoder_and_option(reverse_data):
    out = " ".join(run_cli("fairseq-generate", reverse_data, *PLUGIN, "--help").stdout.split())  # unwrapped
    for entry in entries():
        assert entry.name in out
        for name in entry.option_names():
            assert "--" + name.replace("_", "-") in out
    assert "drafts the last accepted token k times" in out


@pytest.fixture(scope="module")
def engine(reverse_data, tiny_checkpoint):
    from fairseq_plugins.bench import fairseq_engine

    cfg = fairseq_engine.fairseq_config(str(reverse_data), str(tiny_checkpoint), "test", "cpu", False, None,
                                        ["--max-len-b", "30"])
    return fairseq_engine.FairseqEngine(cfg, "cpu", False)


def decode_all(engine, label, drafter_path, batch_size):
    from fairseq_plugins.bench.decoders import parse_spec
    from fairseq_plugins.decoding.registry import decoder_names

    spec = parse_spec(label, decoder_names())
    generator = engine.build_generator(spec, drafter_path)
    outputs = {}
    for batch in engine.batches(list(range(len(engine.dataset))), batch_size):
        for sentence_id, hypos in zip(batch.ids, engine.runner(generator)(batch)):
            outputs[sentence_id] = hypos[0]["tokens"].tolist()
    return outputs


@pytest.mark.parametrize("name", GREEDY_EQUIVALENT)
@pytest.mark.parametrize("batch_size", [1, 5])
def test_every_greedy_equivalent_decoder_equals_greedy(engine, drafter, name, batch_size):  # noqa: F811
    greedy = decode_all(engine, "beam1", None, batch_size)
    for label in (name, f"{name}:length=fixed", f"{name}:length=adaptive"):
        assert decode_all(engine, label, str(drafter), batch_size) == greedy, label


@pytest.mark.slow
def test_test_suite_decoder_through_fairseq_generate(reverse_data, tiny_checkpoint, stock_greedy):
    common = ["--path", tiny_checkpoint, "--gen-subset", "test", "--batch-size", 5, "--max-len-b", 30]
    greedy = stock_greedy(5)
    ours = run_cli("fairseq-generate", reverse_data, *PLUGIN, *common, "--decoding", "repeat-last",
                   "--repeat-default-k", 3)
    assert hypotheses(ours.stdout) == hypotheses(greedy) and len(hypotheses(greedy)) == 24
    assert "repeat-last: 24 sentences" in ours.stderr


@pytest.mark.slow
def test_test_suite_decoder_through_the_harness(reverse_data, tiny_checkpoint, tmp_path):
    out = tmp_path / "latency.json"
    run_cli_module = ["-m", "fairseq_plugins.bench.latency", str(reverse_data), "--path", str(tiny_checkpoint),
                      "--decoders", "beam1,repeat-last:repeat_default_k=3", "--max-sentences", "6", "--warmup", "1",
                      "--no-ctranslate2", "--no-progress-bar", "--out-json", str(out)]
    import subprocess
    import sys

    subprocess.run([sys.executable, *run_cli_module], check=True, cwd=REPO, capture_output=True, text=True)
    rows = {row["decoder"]: row for row in json.loads(out.read_text())["rows"]}
    assert rows["repeat-last:repeat_default_k=3"]["mismatches_vs_greedy"] == 0


@pytest.mark.slow
def test_option_of_another_decoder_is_refused(reverse_data, tiny_checkpoint, drafter):  # noqa: F811
    proc = run_cli("fairseq-generate", reverse_data, *PLUGIN, "--path", tiny_checkpoint, "--decoding", "iad",
                   "--drafter-path", drafter, "--gen-subset", "test", check=False)
    assert proc.returncode != 0 and "--decoding iad does not use --drafter-path" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("extra, message", [
    ("no_such_decoder_module", "FAIRSEQ_PLUGINS_DECODERS: cannot import no_such_decoder_module"),
    ("missing/decoder.py", "FAIRSEQ_PLUGINS_DECODERS: no such file missing/decoder.py"),
])
def test_a_bad_extra_decoder_is_a_one_line_error(reverse_data, tiny_checkpoint, extra, message):
    proc = run_cli("fairseq-generate", reverse_data, *PLUGIN, "--path", tiny_checkpoint, "--decoding", "greedy",
                   "--gen-subset", "test", env={"FAIRSEQ_PLUGINS_DECODERS": extra}, check=False)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def test_a_config_saved_before_an_option_existed_reads_its_default():
    from omegaconf import OmegaConf

    saved = OmegaConf.create({"decoding": "specdec", "block_size": 4, "drafter_path": "d.pt"})
    OmegaConf.set_struct(saved, True)  # unknown keys raise, as in a loaded checkpoint's config
    opts = DECODERS["specdec"].read_options(saved)
    assert opts.block_size == 4 and opts.drafter_path == "d.pt"
    assert opts.draft_length == "measured" and opts.draft_vocab_size is None
