"""``--cpu-autocast bf16``: train on a CPU with PyTorch's bfloat16 autocast.

The weights, the optimizer state and the loss stay float32; the forward's matrix products run in
bfloat16 (oneDNN's AVX512-BF16 / AMX kernels) and so do their gradients. Attention uses SDPA's
composite ("math") kernel: on a CPU its fused bfloat16 kernel has a slow backward. Validation and
generation are not affected (they run in float32).
"""
from contextlib import contextmanager
from dataclasses import field

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from fairseq_plugins_compat.errors import PluginError

CPU_AUTOCAST = ["off", "bf16"]


def cpu_autocast_field():
    """The ``--cpu-autocast`` task option (a dataclass field)."""
    return field(
        default="off",
        metadata={"help": "off (the default): train in float32; bf16: on a CPU, train with bfloat16 autocast "
                          "(weights, optimizer and loss in float32, matrix products in bfloat16; Multi30k "
                          "double-token model, one thread, AVX512-BF16 CPU: ~2x the words/s); needs a CPU "
                          "with bfloat16 support and --cpu (on a GPU use --fp16 or --amp)"},
    )


def bf16_supported() -> bool:
    """Whether this CPU and PyTorch have oneDNN's bfloat16 kernels."""
    return torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()


def check_bf16_kernels() -> None:
    """One-line error for ``--cpu-autocast bf16`` on a CPU without bfloat16 kernels."""
    if not bf16_supported():
        raise PluginError("--cpu-autocast bf16: this CPU (or PyTorch build) has no bfloat16 kernels; "
                          "use --cpu-autocast off")


def check_cpu_autocast(model: torch.nn.Module) -> None:
    """One-line errors for ``--cpu-autocast bf16`` where it cannot run."""
    if any(p.is_cuda for p in model.parameters()):
        raise PluginError("--cpu-autocast bf16 is for training on a CPU (--cpu); on a GPU use --fp16 or --amp")
    check_bf16_kernels()


@contextmanager
def bf16_autocast():
    """CPU bfloat16 autocast with SDPA's composite attention kernel."""
    with torch.autocast("cpu", dtype=torch.bfloat16), sdpa_kernel([SDPBackend.MATH]):
        yield


class CpuAutocastTraining:
    """Task mixin: ``train_step`` under :func:`bf16_autocast` when ``cfg.cpu_autocast`` is bf16
    (the forward and the loss only; the backward runs outside, as PyTorch recommends)."""

    _autocast_checked = False

    def build_model(self, cfg, from_checkpoint=False):
        """A CPU without bfloat16 kernels is refused here, before training starts (the first
        ``train_step`` would leave a crash.pt behind); a model loaded from a checkpoint trained
        with bf16 (e.g. a drafter, for decoding) is not training and passes."""
        if not from_checkpoint and str(getattr(self.cfg, "cpu_autocast", "off")) == "bf16":
            check_bf16_kernels()
        return super().build_model(cfg, from_checkpoint)

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False, **kwargs):
        if str(getattr(self.cfg, "cpu_autocast", "off")) == "off":
            return super().train_step(sample, model, criterion, optimizer, update_num, ignore_grad, **kwargs)
        if not self._autocast_checked:
            check_cpu_autocast(model)
            self._autocast_checked = True
        model.train()
        model.set_num_updates(update_num)
        with torch.autograd.profiler.record_function("forward"), bf16_autocast():
            loss, sample_size, logging_output = criterion(model, sample)
        if ignore_grad:
            loss *= 0
        with torch.autograd.profiler.record_function("backward"):
            optimizer.backward(loss)
        return loss, sample_size, logging_output
