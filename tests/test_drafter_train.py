"""The drafter trained with the stock ``fairseq-train`` console script."""
import re
import shutil

import pytest
import torch
from fairseq import checkpoint_utils
from fairseq.data import data_utils

from conftest import PLUGIN_DIR, TRAIN_FLAGS, run_cli

DRAFTER = ["--user-dir", PLUGIN_DIR, "--task", "speculative_translation", "--arch", "block_drafter_tiny",
           "--criterion", "glancing_block_loss", "--dropout", "0.1"]
QUIET = ["--no-epoch-checkpoints", "--validate-interval", "1000", "--save-interval", "1000"]


def train_drafter(data, save_dir, max_update, *extra):
    proc = run_cli("fairseq-train", data, *DRAFTER, *TRAIN_FLAGS, *QUIET, "--max-update", max_update,
                   "--save-dir", save_dir, *extra)
    return proc.stdout + proc.stderr


def block_accuracy(model, task, split="test"):
    """Accuracy of the k drafted tokens after every gold prefix p = 0 .. m (teacher forcing),
    over block positions inside the target (its eos included)."""
    task.load_dataset(split)
    dataset = task.dataset(split)
    eos, k = task.target_dictionary.eos(), model.block_size
    correct = total = 0
    for i in range(len(dataset)):
        item = dataset[i]
        src, target = item["source"][None], item["target"]
        encoder_out = model.encoder(src, torch.tensor([src.size(1)]))
        for p in range(len(target)):
            prefix = torch.cat([torch.tensor([eos]), target[:p]])[None]
            draft = model.propose(encoder_out, prefix, torch.tensor([p + 1]), k)[0]
            gold = target[p:p + k]
            correct += int((draft[:len(gold)] == gold).sum())
            total += len(gold)
    return correct / total


@pytest.mark.slow
def test_a_drafter_with_an_empty_block_is_refused_in_one_line(reverse_data, tmp_path):
    from test_cli_end_to_end import assert_one_line_error

    proc = run_cli("fairseq-train", reverse_data, *DRAFTER, *TRAIN_FLAGS, *QUIET, "--max-update", "1",
                   "--save-dir", tmp_path, "--block-size", "0", check=False)
    assert_one_line_error(proc, "fairseq-train", "--block-size must be >= 1, got 0")
    assert not list(tmp_path.glob("*.pt"))


@pytest.mark.slow
def test_drafter_learns_the_reverse_task(reverse_data, tmp_path):
    log = train_drafter(reverse_data, tmp_path, 300, "--lr", "0.01", "--dropout", "0.0")
    ratios = [float(r) for r in re.findall(r"train_inner .*glance_ratio=([\d.]+)", log)]
    assert ratios and 0.3 <= min(ratios) < max(ratios) <= 0.5  # annealed over --max-update
    assert re.search(r"glance_acc[= ][\d.]+", log)
    models, _cfg, task = checkpoint_utils.load_model_ensemble_and_task([str(tmp_path / "checkpoint_last.pt")])
    accuracy = block_accuracy(models[0].eval(), task)
    assert accuracy > 0.7, accuracy  # 0.83 when written; a random drafter is at ~1/|V| = 0.04


@pytest.mark.slow
def test_console_training_from_a_verifier_then_loading_without_it(reverse_data, tiny_checkpoint, tmp_path):
    verifier = tmp_path / "verifier.pt"
    shutil.copy(tiny_checkpoint, verifier)
    log = train_drafter(reverse_data, tmp_path / "drafter", 8, "--init-from-verifier", verifier,
                        "--glance-ratio-start", "0.5", "--glance-ratio-end", "0.5")
    assert "initialised the drafter's encoder and embeddings" in log
    assert "glance_ratio 0.5" in log
    verifier.unlink()  # the trained drafter must load without its verifier
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([str(tmp_path / "drafter" / "checkpoint_last.pt")])
    drafter = models[0].eval()
    assert cfg.model.verifier_init_applied and not cfg.model.encoder_learned_pos  # verifier's sinusoids
    src = data_utils.collate_tokens([task.source_dictionary.encode_line("w1 w2 w3")], task.source_dictionary.pad())
    encoder_out = drafter.encoder(src, torch.tensor([src.size(1)]))
    draft = drafter.propose(encoder_out, torch.tensor([[task.target_dictionary.eos()]]), torch.tensor([1]), drafter.block_size)
    assert draft.shape == (1, drafter.block_size)


@pytest.mark.slow
def test_validation_drafter_bleu(reverse_data, tmp_path):
    log = train_drafter(reverse_data, tmp_path, 10, "--decoding", "drafter-only", "--eval-bleu",
                        "--eval-bleu-args", '{"max_len_a": 1.2, "max_len_b": 10}',
                        "--validate-interval", "1", "--max-epoch", "2")
    assert re.search(r"valid on 'valid' subset .*bleu [\d.]+", log), log[-3000:]


@pytest.mark.slow
def test_console_training_with_the_shared_frozen_encoder_and_spec_eval(reverse_data, tiny_checkpoint, tmp_path):
    from fairseq_plugins.models.drafter_init import encoder_fingerprint

    log = train_drafter(reverse_data, tmp_path, 30, "--init-from-verifier", tiny_checkpoint, "--share-verifier-encoder",
                        "--best-checkpoint-metric", "spec_tokens_per_iter", "--maximize-best-checkpoint-metric",
                        "--validate-interval", "1", "--save-interval", "1", "--max-epoch", "2")
    per_iter = [float(v) for v in re.findall(r"valid on 'valid' subset .*spec_tokens_per_iter ([\d.]+)", log)]
    assert per_iter and all(1.0 <= v <= 5.0 for v in per_iter), log[-3000:]  # k = 4: at most k + 1
    assert "drafter decoder layers from" in log and "copied [" in log
    best = torch.load(tmp_path / "checkpoint_best.pt", weights_only=False)
    assert best["cfg"]["model"].share_verifier_encoder and best["cfg"]["checkpoint"]["best_checkpoint_metric"] == "spec_tokens_per_iter"
    models, cfg, _task = checkpoint_utils.load_model_ensemble_and_task([str(tmp_path / "checkpoint_last.pt")])
    verifier = checkpoint_utils.load_model_ensemble_and_task([str(tiny_checkpoint)])[0][0]
    assert cfg.model.verifier_encoder_fingerprint == encoder_fingerprint(verifier.encoder)
    assert encoder_fingerprint(models[0].encoder) == encoder_fingerprint(verifier.encoder)  # frozen while training
