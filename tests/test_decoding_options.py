"""The plugin decoders' option surprises are one-line errors, never silent."""
import pytest

from conftest import PLUGIN_DIR, run_cli

PLUGIN = ["--user-dir", PLUGIN_DIR, "--task", "speculative_translation"]


def generate(reverse_data, tiny_checkpoint, *options):
    return run_cli("fairseq-generate", reverse_data, *PLUGIN, "--path", tiny_checkpoint, "--gen-subset", "test",
                   "--max-len-b", 10, *options, check=False)


@pytest.mark.slow
@pytest.mark.parametrize("options, message", [
    (["--decoding", "iad", "--beam", 5], "--decoding iad decodes greedily (one hypothesis): drop --beam 5"),
    (["--decoding", "gs-jacobi", "--block-size", 0], "--block-size must be >= 1, got 0"),
    (["--decoding", "specdec++"], "--decoding specdec++ needs --drafter-path"),
    (["--decoding", "drafter-only"], "--decoding drafter-only needs --drafter-path"),
    (["--decoding", "jacobi", "--beta", 3], "--decoding jacobi does not use --beta"),
    (["--decoding", "iad", "--iad-match-length", 0], "--iad-match-length must be >= 1, got 0"),
    (["--decoding", "hybrid-jacobi", "--hybrid-length", -1], "--hybrid-length must be >= 0, got -1"),
])
def test_option_surprises_are_one_line_errors(reverse_data, tiny_checkpoint, options, message):
    proc = generate(reverse_data, tiny_checkpoint, *options)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_untyped_default_beam_is_not_refused(reverse_data, tiny_checkpoint):
    proc = generate(reverse_data, tiny_checkpoint, "--decoding", "iad")  # fairseq's default --beam is 5
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "beam=1" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("decoding", ["beam", "iad"])
def test_fp16_on_cpu_is_refused_for_every_decoding(reverse_data, tiny_checkpoint, decoding):
    proc = generate(reverse_data, tiny_checkpoint, "--decoding", decoding, "--fp16", "--cpu", "--beam", 1)
    assert proc.returncode != 0 and "fp16 decoding needs a CUDA device" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
