"""End to end through the real console scripts: fairseq-train, fairseq-generate and
fairseq-interactive with ``--task double_token_translation`` on the synthetic reverse task."""
import re

import pytest

from conftest import PLUGIN_DIR, TRAIN_FLAGS, run_cli

pytestmark = pytest.mark.slow

TASK = ["--user-dir", PLUGIN_DIR, "--task", "double_token_translation"]
MODEL = ["--arch", "double_token_transformer_tiny", "--share-all-embeddings",
         "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1"]


def train(data, save_dir, order, max_update, extra=()):
    run_cli("fairseq-train", data, *TASK, "--target-order", order, *MODEL, *TRAIN_FLAGS,
            "--max-update", max_update, "--save-dir", save_dir, "--no-epoch-checkpoints", *extra)
    return save_dir / "checkpoint_last.pt"


def hypotheses(output):
    """``{sentence id: [(score, text), ...]}`` from H- lines."""
    found = {}
    for sid, score, text in re.findall(r"^H-(\d+)\t(\S+)\t?(.*)$", output, flags=re.M):
        found.setdefault(int(sid), []).append((float(score), text))
    return found


@pytest.fixture(scope="module")
def bidirectional_checkpoint(reverse_data, tmp_path_factory):
    """Tiny double-token model, 80 updates, with --eval-bleu (the task's generator in validation)."""
    save_dir = tmp_path_factory.mktemp("double_token_ckpt")
    extra = ["--eval-bleu", "--eval-bleu-args", '{"beam": 2}', "--validate-interval", "8"]
    return train(reverse_data, save_dir, "bidirectional", 80, extra)


def test_generate_beam_nbest_and_greedy(reverse_data, bidirectional_checkpoint):
    common = [reverse_data, *TASK, "--path", bidirectional_checkpoint, "--cpu", "--batch-size", "8"]
    out = run_cli("fairseq-generate", *common, "--beam", "4", "--nbest", "2").stdout
    assert re.search(r"Generate test with beam=4: BLEU4 = \d", out)
    found = hypotheses(out)
    assert sorted(found) == list(range(24)) and all(len(h) == 2 for h in found.values())
    assert all(h[0][0] >= h[1][0] for h in found.values())
    assert "<s>" not in out and "</s>" not in out
    for text, positional in re.findall(r"^D-\d+\t\S+\t?(.*)\nP-\d+\t(.*)$", out, flags=re.M):
        assert len(positional.split()) == len(text.split()) + 1  # + eos (carries the EOD scores)
    greedy = run_cli("fairseq-generate", *common, "--beam", "1").stdout
    assert sorted(hypotheses(greedy)) == list(range(24)) and "BLEU4 =" in greedy


def test_interactive(reverse_data, bidirectional_checkpoint):
    out = run_cli("fairseq-interactive", reverse_data, *TASK, "--path", bidirectional_checkpoint, "--cpu",
                  "--beam", "3", "--nbest", "2", input="w1 w2 w3\nw4 w5 w6 w7 w8\n").stdout
    found = hypotheses(out)
    assert sorted(found) == [0, 1] and all(len(h) == 2 for h in found.values())
    assert all(re.fullmatch(r"(w\d+( w\d+)*)?", text) for h in found.values() for _, text in h)


def test_bad_options_are_one_line_errors(reverse_data, bidirectional_checkpoint):
    common = [reverse_data, *TASK, "--path", bidirectional_checkpoint, "--cpu"]
    proc = run_cli("fairseq-generate", *common, "--sampling", "--beam", "2", "--nbest", "2",
                   "--no-repeat-ngram-size", "2", check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "fairseq-generate: error: --target-order bidirectional does not support: --sampling, --no-repeat-ngram-size")
    proc = run_cli("fairseq-generate", *common, "--target-order", "double_l2r", check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "trained with --target-order bidirectional, not double_l2r" in proc.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("order", ["single_r2l", "double_r2l"])
def test_comparison_systems_train_and_generate(reverse_data, tmp_path, order):
    checkpoint = train(reverse_data, tmp_path, order, 20)
    out = run_cli("fairseq-generate", reverse_data, *TASK, "--target-order", order, "--path", checkpoint,
                  "--cpu", "--batch-size", "8", "--beam", "2").stdout
    assert sorted(hypotheses(out)) == list(range(24)) and "BLEU4 =" in out
