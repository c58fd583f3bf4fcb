"""The plugin's task through the stock CLIs: options in --help, --decoding dispatch,
clear errors, and greedy parity of the training-free decoders end to end."""
import re

import pytest

from conftest import PLUGIN_DIR, run_cli
from fairseq_plugins.decoding.registry import decoder_names
from test_cli_end_to_end import hypotheses

PLUGIN = ["--user-dir", PLUGIN_DIR, "--task", "speculative_translation"]


@pytest.mark.slow
def test_task_and_decoding_option_in_help(reverse_data):
    listing = run_cli("fairseq-generate", reverse_data, "--user-dir", PLUGIN_DIR, "--task", "no_such_task", check=False).stderr
    assert "invalid choice: 'no_such_task'" in listing and "'speculative_translation'" in listing
    help_text = run_cli("fairseq-generate", reverse_data, *PLUGIN, "--help").stdout
    assert "--decoding" in help_text and "--drafter-path" in help_text and "--block-size" in help_text
    for name in decoder_names():
        assert name in help_text


@pytest.mark.slow
def test_wrong_decoding_value_is_a_one_line_error(reverse_data, tiny_checkpoint):
    proc = run_cli("fairseq-generate", reverse_data, *PLUGIN, "--path", tiny_checkpoint, "--decoding", "fastest", check=False)
    assert proc.returncode == 2
    assert "argument --decoding: invalid choice: 'fastest'" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_unsupported_generation_option_is_a_one_line_error(reverse_data, tiny_checkpoint):
    proc = run_cli("fairseq-generate", reverse_data, *PLUGIN, "--path", tiny_checkpoint, "--decoding", "iad",
                   "--nbest", 2, "--no-repeat-ngram-size", 2, check=False)
    assert proc.returncode != 0
    assert "--decoding iad does not support: --nbest > 1, --no-repeat-ngram-size" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_specdec_without_drafter_is_a_one_line_error(reverse_data, tiny_checkpoint):
    proc = run_cli("fairseq-generate", reverse_data, *PLUGIN, "--path", tiny_checkpoint, "--decoding", "specdec", check=False)
    assert proc.returncode != 0 and "needs --drafter-path" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_beam_decoding_through_the_plugin_task_is_stock(reverse_data, tiny_checkpoint):
    stock = run_cli("fairseq-generate", reverse_data, "--path", tiny_checkpoint, "--beam", 5, "--gen-subset", "test").stdout
    plugin = run_cli("fairseq-generate", reverse_data, *PLUGIN, "--path", tiny_checkpoint, "--beam", 5, "--gen-subset", "test").stdout
    assert hypotheses(plugin) == hypotheses(stock)


@pytest.mark.slow
@pytest.mark.parametrize("batch_size", [1, 8])
@pytest.mark.parametrize("decoding", ["iad", "jacobi", "gs-jacobi", "hybrid-jacobi"])
def test_training_free_decoders_match_greedy_through_the_cli(reverse_data, tiny_checkpoint, stock_greedy, decoding,
                                                             batch_size):
    common = ["--path", tiny_checkpoint, "--gen-subset", "test", "--batch-size", batch_size, "--max-len-b", 30]
    stock = stock_greedy(batch_size)
    ours = run_cli("fairseq-generate", reverse_data, *PLUGIN, *common, "--decoding", decoding, "--print-step").stdout
    assert hypotheses(ours) == hypotheses(stock)
    assert len(hypotheses(ours)) == 24
    steps = [int(m) for m in re.findall(r"^I-\d+\t(\d+)", ours, re.M)]
    assert len(steps) == 24


@pytest.mark.slow
def test_interactive_with_a_parallel_decoder_and_an_empty_line(reverse_data, tiny_checkpoint, stock_interactive_greedy):
    lines, stock = stock_interactive_greedy
    args = [reverse_data, "--path", tiny_checkpoint, "--source-lang", "src", "--target-lang", "tgt", "--beam", 1]
    ours = run_cli("fairseq-interactive", *args, *PLUGIN, "--decoding", "gs-jacobi", input=lines).stdout
    assert hypotheses(ours) == hypotheses(stock) and len(hypotheses(ours)) == 3
