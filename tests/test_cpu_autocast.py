"""``--cpu-autocast bf16``: the training forward in bfloat16, weights, gradients and loss in float32."""
import argparse

import pytest
import torch
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
)
from fairseq.data import Dictionary, LanguagePairDataset
from fairseq.models import ARCH_CONFIG_REGISTRY

from conftest import PLUGIN_DIR, TRAIN_FLAGS, run_cli
from fairseq_plugins.double_token.dataset import DecodingOrderDataset
from fairseq_plugins.training import cpu_autocast
from fairseq_plugins.tasks.double_token_translation import DoubleTokenTranslationConfig, DoubleTokenTranslationTask
from fairseq_plugins_compat.errors import PluginError

needs_bf16 = pytest.mark.skipif(not cpu_autocast.bf16_supported(), reason="this CPU has no bfloat16 kernels")


class PlainOptimizer:
    """What ``train_step`` needs of fairseq's optimizer."""

    @staticmethod
    def backward(loss):
        loss.backward()


def _task_model_sample(mode):
    dictionary = Dictionary()
    for i in range(20):
        dictionary.add_symbol(f"w{i}")
    cfg = DoubleTokenTranslationConfig(data="", source_lang="src", target_lang="tgt", cpu_autocast=mode)
    task = DoubleTokenTranslationTask(cfg, dictionary, dictionary)
    args = argparse.Namespace(arch="double_token_transformer_tiny", share_all_embeddings=True, dropout=0.0)
    ARCH_CONFIG_REGISTRY[args.arch](args)
    torch.manual_seed(0)
    model = task.build_model(args)
    eos = dictionary.eos()
    targets = [torch.tensor(list(range(4, 4 + n)) + [eos]) for n in (3, 6, 9)]
    sources = [torch.tensor([5, 6, 7, 8, eos])] * 3
    inner = LanguagePairDataset(sources, [5] * 3, dictionary, targets, [len(t) for t in targets], dictionary)
    sample = DecodingOrderDataset(inner, "bidirectional", dictionary).collater([inner[i] for i in range(3)])
    return task, model, sample


def _train_step(mode):
    """(loss, dtypes of the decoder's output-projection results, the model) after one train_step."""
    task, model, sample = _task_model_sample(mode)
    criterion = LabelSmoothedCrossEntropyCriterion(task, sentence_avg=False, label_smoothing=0.1)
    seen = []
    model.decoder.output_projection.register_forward_hook(lambda _m, _i, out: seen.append(out.dtype))
    loss, _size, _log = task.train_step(sample, model, criterion, PlainOptimizer(), update_num=0)
    return loss, seen, model


@needs_bf16
def test_bf16_runs_the_forward_in_bfloat16_and_keeps_float32_weights_and_gradients():
    loss16, dtypes16, model = _train_step("bf16")
    loss32, dtypes32, _ = _train_step("off")
    assert dtypes16 == [torch.bfloat16] and dtypes32 == [torch.float32]
    assert loss16.dtype == torch.float32
    assert loss16.item() == pytest.approx(loss32.item(), rel=2e-2)
    for name, parameter in model.named_parameters():
        assert parameter.dtype == torch.float32, name
        assert parameter.grad is not None and parameter.grad.dtype == torch.float32, name
    assert any(p.grad.abs().sum() > 0 for p in model.parameters())
    assert not torch.is_autocast_enabled("cpu")  # the context is left after the step


def test_bf16_without_cpu_support_is_one_line_error(monkeypatch):
    monkeypatch.setattr(cpu_autocast, "bf16_supported", lambda: False)
    with pytest.raises(PluginError, match="no bfloat16 kernels") as error:
        _train_step("bf16")
    assert "\n" not in str(error.value)


def test_bf16_without_cpu_support_is_refused_before_training_but_not_when_loading(monkeypatch):
    """build_model refuses it (no crash.pt from a failed first step); a checkpoint trained with
    bf16 still loads for decoding on such a CPU (from_checkpoint)."""
    monkeypatch.setattr(cpu_autocast, "bf16_supported", lambda: False)
    task, _model, _sample = _task_model_sample("off")
    task.cfg.cpu_autocast = "bf16"
    args = argparse.Namespace(arch="double_token_transformer_tiny", share_all_embeddings=True, dropout=0.0)
    ARCH_CONFIG_REGISTRY[args.arch](args)
    with pytest.raises(PluginError, match="no bfloat16 kernels"):
        task.build_model(args)
    loaded = task.build_model(args, from_checkpoint=True)
    assert type(loaded) is type(_model) and all(p.dtype == torch.float32 for p in loaded.parameters())


@pytest.mark.slow
@needs_bf16
def test_console_training_with_bf16_autocast(reverse_data, tmp_path):
    proc = run_cli("fairseq-train", reverse_data, "--user-dir", PLUGIN_DIR, "--task", "double_token_translation",
                   "--arch", "double_token_transformer_tiny", "--share-all-embeddings",
                   "--criterion", "label_smoothed_cross_entropy", *TRAIN_FLAGS, "--max-update", "6",
                   "--save-dir", tmp_path, "--no-epoch-checkpoints", "--cpu-autocast", "bf16")
    state = torch.load(tmp_path / "checkpoint_last.pt", weights_only=False)
    assert state["cfg"]["task"]["cpu_autocast"] == "bf16"
    assert state["optimizer_history"][-1]["num_updates"] == 6
    assert all(v.dtype == torch.float32 for v in state["model"].values() if v.is_floating_point())
    assert "loss" in proc.stdout + proc.stderr


@pytest.mark.slow
@needs_bf16
def test_console_drafter_training_with_bf16_autocast(reverse_data, tiny_checkpoint, tmp_path):
    """The glancing drafter (two forwards per step, the first without gradients) trains too."""
    run_cli("fairseq-train", reverse_data, "--user-dir", PLUGIN_DIR, "--task", "speculative_translation",
            "--arch", "block_drafter_tiny", "--criterion", "glancing_block_loss", "--init-from-verifier",
            tiny_checkpoint, *TRAIN_FLAGS, "--max-update", "6", "--save-dir", tmp_path, "--no-epoch-checkpoints",
            "--no-spec-eval", "--cpu-autocast", "bf16")
    state = torch.load(tmp_path / "checkpoint_last.pt", weights_only=False)
    assert state["cfg"]["task"]["cpu_autocast"] == "bf16"
    assert state["optimizer_history"][-1]["num_updates"] == 6
    # fairseq's sinusoidal positions keep an uninitialised one-element placeholder (any bits, NaN included)
    weights = {k: v for k, v in state["model"].items() if v.is_floating_point() and not k.endswith("._float_tensor")}
    assert weights and all(torch.isfinite(v).all() for v in weights.values())
