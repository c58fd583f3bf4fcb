"""One unit test (at least) per compatibility shim of fairseq_plugins_compat."""
import argparse
import dataclasses
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import torch

from conftest import translation_task
from fairseq_plugins_compat import checkpoint_loading, patches, score, startup
from fairseq_plugins_compat.checkpoint_loading import CheckpointError, UnsafeCheckpointError


# -- 1. dataclass instance defaults on Python >= 3.11 ------------------------------------------

def _define_config(module_name):
    @dataclasses.dataclass
    class Inner:
        x: int = 1

    namespace = {"__module__": module_name, "__annotations__": {"inner": Inner}, "inner": Inner()}
    return dataclasses.dataclass(type("Outer", (), namespace)), Inner


def test_dataclass_shim_is_needed_from_311_only():
    assert startup.needs_dataclass_default_shim((3, 11, 0))
    assert not startup.needs_dataclass_default_shim((3, 10, 9))


def test_fairseq_configs_keep_instance_defaults():
    outer, inner = _define_config("fairseq.dataclass.fake")
    field = dataclasses.fields(outer)[0]
    assert isinstance(field.default, inner)  # a real default, as fairseq's hydra_init reads it
    assert inner.__hash__ is None  # the class is left unhashable afterwards


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Python < 3.11 allows these defaults anyway")
def test_other_modules_still_get_pythons_check():
    with pytest.raises(ValueError, match="mutable default"):
        _define_config("someone_else.module")


def test_startup_hook_is_installed_in_site_packages():
    pth = Path(sysconfig.get_paths()["purelib"]) / "fairseq_plugins_compat.pth"
    assert pth.read_text().strip() == "import fairseq_plugins_compat.startup as s; s.install()"
    fresh = subprocess.run([sys.executable, "-c", "import fairseq.models.transformer, fairseq_cli.train; print('ok')"],
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ""})
    assert fresh.returncode == 0, fresh.stderr[-2000:]


# -- 2. checkpoint loading on torch >= 2.6 ------------------------------------------------------

def test_safe_loading_needed_from_torch_26():
    assert checkpoint_loading.needs_safe_loading_shim("2.6.0")
    assert checkpoint_loading.needs_safe_loading_shim("2.13.0+cpu")
    assert not checkpoint_loading.needs_safe_loading_shim("2.5.1")


def _save(tmp_path, obj, name="ckpt.pt"):
    path = tmp_path / name
    torch.save(obj, path)
    return str(path)


def test_allowlisted_checkpoint_loads(tmp_path):
    import numpy as np

    state = {"model": {"w": torch.ones(2)}, "cfg": {"model": argparse.Namespace(arch="transformer")},
             "extra_state": {"best": np.float64(1.5), "arr": np.arange(3)}}
    loaded = checkpoint_loading.load_checkpoint_file(_save(tmp_path, state))
    assert loaded["cfg"]["model"].arch == "transformer"
    assert float(loaded["extra_state"]["best"]) == 1.5


class _NotAllowed:
    def __reduce__(self):
        return (os.getcwd, ())  # harmless, but code all the same


def test_checkpoint_carrying_code_is_refused_with_the_class_and_opt_in(tmp_path, monkeypatch):
    path = _save(tmp_path, {"model": {}, "cfg": {}, "x": _NotAllowed()})
    with pytest.raises(UnsafeCheckpointError, match=r"posix.getcwd.*FAIRSEQ_PLUGINS_TRUST_CHECKPOINTS=1"):
        checkpoint_loading.load_checkpoint_file(path)
    monkeypatch.setenv(checkpoint_loading.TRUST_ENV_VAR, "1")
    assert checkpoint_loading.load_checkpoint_file(path)["x"] == os.getcwd()


@pytest.mark.parametrize("content,message", [
    (b"hello, not a checkpoint\n", "bad.pt is not a fairseq checkpoint (not a torch file)"),
    (b"# README\n\nsome text\n", "bad.pt is not a fairseq checkpoint (not a torch file)"),
    (b"a b c\n", "bad.pt is not a fairseq checkpoint (not a torch file)"),  # "pop from empty list" in torch
    (b"", "bad.pt is not a fairseq checkpoint (empty file)"),
    (b"\x80\x02abc", "bad.pt is not a fairseq checkpoint (corrupt or not a torch file)"),
    (None, "truncated"),
])
def test_bad_files_give_one_line_errors(tmp_path, content, message):
    path = tmp_path / "bad.pt"
    if content is None:
        good = _save(tmp_path, {"model": {"w": torch.zeros(100)}, "cfg": {}}, "good.pt")
        content = Path(good).read_bytes()[:200]
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match=re.escape(message)) as error:
        checkpoint_loading.load_checkpoint_file(str(path))
    assert "\n" not in str(error.value)


def test_text_file_is_no_checkpoint_even_when_trusted(tmp_path, monkeypatch):
    monkeypatch.setenv(checkpoint_loading.TRUST_ENV_VAR, "1")
    path = tmp_path / "dict.txt"
    path.write_text("w1 10\nw2 5\n")
    with pytest.raises(CheckpointError, match=r"dict.txt is not a fairseq checkpoint \(not a torch file\)"):
        checkpoint_loading.load_checkpoint_file(str(path))


@pytest.mark.parametrize("kind,message", [("missing", "does not exist"), ("directory", "is a directory")])
def test_missing_path_or_directory_is_a_checkpoint_error(tmp_path, kind, message):
    from fairseq import checkpoint_utils

    path = tmp_path / "nothing.pt" if kind == "missing" else tmp_path
    with pytest.raises(CheckpointError, match=message):
        checkpoint_loading.load_checkpoint_file(str(path))
    with pytest.raises(CheckpointError, match=message):  # fairseq raised OSError / IsADirectoryError
        checkpoint_utils.load_model_ensemble_and_task([str(path)])


def test_non_fairseq_pickle_is_rejected(tmp_path):
    with pytest.raises(CheckpointError, match="not a fairseq checkpoint"):
        checkpoint_loading.load_checkpoint_file(_save(tmp_path, {"weights": torch.zeros(1)}))


def test_fairseq_checkpoint_utils_uses_the_safe_loader(tmp_path):
    from fairseq import checkpoint_utils

    assert isinstance(checkpoint_utils.torch, patches._TorchWithSafeLoad)
    path = _save(tmp_path, {"model": {}, "cfg": None, "x": _NotAllowed()})
    with pytest.raises(UnsafeCheckpointError):
        checkpoint_utils.load_checkpoint_to_cpu(path)


def test_saved_user_dir_is_imported(tmp_path):
    plugin = tmp_path / "my_plugin_for_test"
    plugin.mkdir()
    (plugin / "__init__.py").write_text("IMPORTED = True\n")
    patches._import_saved_user_dir({"cfg": {"common": {"user_dir": str(plugin)}}})
    assert sys.modules["my_plugin_for_test"].IMPORTED


def test_saved_user_dir_of_an_imported_module_is_kept_silently(tmp_path, caplog):
    """A checkpoint trained in another clone names that clone's fairseq_plugins: the one
    already imported serves (fairseq would refuse a second module of the same name)."""
    import fairseq_plugins

    clone = tmp_path / "clone" / "fairseq_plugins"
    clone.mkdir(parents=True)
    (clone / "__init__.py").write_text("raise RuntimeError('the clone must not be imported')\n")
    patches._import_saved_user_dir({"cfg": {"common": {"user_dir": str(clone)}}})
    assert sys.modules["fairseq_plugins"] is fairseq_plugins
    assert "could not import" not in caplog.text


@pytest.mark.slow
def test_saved_user_dir_that_is_gone_resolves_the_installed_plugin(tmp_path):
    code = ("import sys, logging; logging.basicConfig()\n"
            "from fairseq_plugins_compat import patches\n"
            "assert 'fairseq_plugins' not in sys.modules\n"
            f"patches._import_saved_user_dir({{'cfg': {{'common': {{'user_dir': '{tmp_path}/gone/fairseq_plugins'}}}}}})\n"
            "from fairseq.tasks import TASK_REGISTRY\n"
            "print('speculative_translation' in TASK_REGISTRY)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "True"
    assert "could not import" not in proc.stderr


# -- 3. encoder BetterTransformer fast path -----------------------------------------------------

def _encoder_layer(normalize_before=False):
    from fairseq.models.transformer import TransformerConfig
    from fairseq.modules.transformer_layer import TransformerEncoderLayerBase

    cfg = TransformerConfig()
    cfg.encoder.embed_dim, cfg.encoder.ffn_embed_dim, cfg.encoder.attention_heads = 16, 32, 2
    cfg.encoder.normalize_before = normalize_before
    return TransformerEncoderLayerBase(cfg)


def test_encoder_layer_has_no_fastpath_parameters():
    layer = _encoder_layer()
    names = {name for name, _ in layer.named_parameters()}
    assert not names & set(patches.BT_PARAMETER_NAMES)
    assert layer.BT_version is False


def test_post_norm_encoder_runs_in_eval_and_every_parameter_gets_a_gradient():
    layer = _encoder_layer()
    x = torch.randn(5, 2, 16)
    mask = torch.tensor([[False] * 5, [True] + [False] * 4])
    layer.train()
    layer(x, mask).sum().backward()
    assert all(p.grad is not None for p in layer.parameters())  # DDP-safe
    layer.eval()
    state = layer.state_dict()
    stock_state = {**state, **{name: torch.zeros(1) for name in patches.BT_PARAMETER_NAMES}}
    layer.load_state_dict(stock_state)  # checkpoints saved by stock fairseq still load
    assert layer(x, mask).shape == x.shape


# -- 4. DDP on CPU ------------------------------------------------------------------------------

def test_cpu_ddp_ignores_device_ids(tmp_path):
    import torch.distributed as dist
    from fairseq.models import distributed_fairseq_model

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        wrapped = distributed_fairseq_model.DistributedDataParallel(torch.nn.Linear(2, 2), device_ids=[0], output_device=0)
        assert isinstance(wrapped, torch.nn.parallel.DistributedDataParallel)
    finally:
        dist.destroy_process_group()


# -- 4b. the thread that makes the next batches, at exit ---------------------------------------

SLOW_BATCHES = """
import torch
from fairseq.data.iterators import BufferedIterator

class SlowBatches:
    made = 0
    def __len__(self):
        return 1000
    def __iter__(self):
        a = torch.randn(400, 400)
        for i in range(1000):
            for _ in range(20):
                a = torch.tanh(a @ a)  # the GIL released inside torch, as in a collate
            SlowBatches.made += 1
            yield i
"""


def test_a_process_that_exits_while_batches_are_being_made_exits_cleanly():
    """Without the shim the interpreter ends the daemon thread inside a torch call: abort, exit 134."""
    code = SLOW_BATCHES + "print(next(iter(BufferedIterator(5, SlowBatches()))))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert (proc.returncode, proc.stdout) == (0, "0\n") and "terminate" not in proc.stderr, proc.stderr


def test_stopping_the_batch_thread_ends_it_after_its_current_batch_with_the_queue_full():
    namespace = {}
    exec(SLOW_BATCHES, namespace)
    batches = namespace["BufferedIterator"](1, namespace["SlowBatches"]())
    assert next(batches) == 0
    thread = batches._consumer
    while batches._queue.qsize() < 1:  # the queue full: the thread waits to put the next batch
        thread.join(0.01)
    patches.stop_prefetching()
    assert not thread.is_alive()
    assert namespace["SlowBatches"].made < 5


# -- 5. fairseq-score with sacrebleu 2.x --------------------------------------------------------

def test_score_shim_needed_for_sacrebleu_2():
    assert score.needs_score_shim("2.4.0")
    assert not score.needs_score_shim("1.5.1")


def test_fairseq_score_cli_main_is_replaced():
    import fairseq_cli.score

    assert fairseq_cli.score.cli_main.__module__ == "fairseq_plugins_compat.score"


# -- 6. --help lists the options of --task/--arch -----------------------------------------------

def test_help_includes_task_and_model_options(capsys):
    from fairseq import options

    parser = options.get_training_parser()
    with pytest.raises(SystemExit) as exit_info:
        options.parse_args_and_arch(parser, ["data", "--task", "translation", "--arch", "transformer", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "--eval-bleu" in out and "--encoder-layers" in out  # task- and model-specific


def test_help_without_positional_arguments_is_no_usage_error(capsys):
    from fairseq import options

    parser = options.get_generation_parser()
    parser.add_argument("--arch", "-a", default="wav2vec2")  # as fairseq-generate does
    with pytest.raises(SystemExit) as exit_info:
        options.parse_args_and_arch(parser, ["--task", "translation", "--help"])
    captured = capsys.readouterr()
    assert exit_info.value.code == 0
    assert "--left-pad-source" in captured.out  # the task's options
    assert "--extractor-mode" not in captured.out  # no options of the placeholder wav2vec2 arch
    assert captured.err == ""
    assert parser._option_string_actions["--arch"].default == "wav2vec2"  # parser restored
    assert "error" not in vars(parser)


def test_hydra_plugin_scan_works_without_find_module(monkeypatch):
    """Python 3.12 removed ``FileFinder.find_module``, which hydra 1.0's plugin scan calls."""
    from importlib.machinery import FileFinder

    monkeypatch.delattr(FileFinder, "find_module", raising=False)
    startup.give_back_find_module()
    assert hasattr(FileFinder, "find_module")
    import hydra.core.plugins as plugins
    from hydra.core.plugins import Plugins
    from hydra._internal.core_plugins.basic_launcher import BasicLauncher
    from hydra.plugins.launcher import Launcher

    monkeypatch.setattr(plugins.Singleton, "_instances", {})  # scan afresh, with the shim
    assert BasicLauncher in Plugins.instance().discover(Launcher)  # the scan found hydra's own plugins


def test_find_module_is_given_back_at_interpreter_start_not_when_hydra_is_imported():
    """Under pytest, hydra (a pytest plugin) is imported through pytest's import hook, ahead of
    the shims' post-import hook: on Python 3.12 every in-process fairseq test failed in hydra's
    plugin scan.  ``install()`` gives ``find_module`` back at once."""
    code = (
        "import sys\n"
        "from importlib.machinery import FileFinder\n"
        "if hasattr(FileFinder, 'find_module'): del FileFinder.find_module  # as on Python 3.12\n"
        "import fairseq_plugins_compat.startup as startup\n"
        "startup.install()\n"
        "print(hasattr(FileFinder, 'find_module'), 'hydra' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "False"]


def test_cpu_gradients_are_clipped_on_the_cpu_when_cuda_is_available(monkeypatch):
    """fairseq's clip_grad_norm_ put the norm on the GPU whenever CUDA was available, so
    ``fairseq-train --cpu --clip-norm`` failed on a GPU machine (device mismatch)."""
    import fairseq.utils

    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(3, 4)), torch.nn.Parameter(torch.randn(5))]
    for p in params:
        p.grad = torch.randn_like(p) * 10
    expected_norm = torch.cat([p.grad.flatten() for p in params]).norm()
    expected = [p.grad * (1.0 / (expected_norm + 1e-6)) for p in params]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: pytest.fail("the norm was put on the GPU"))
    norm = fairseq.utils.clip_grad_norm_(params, 1.0)
    assert norm.device.type == "cpu" and torch.allclose(norm, expected_norm)
    for p, clipped in zip(params, expected):
        assert torch.allclose(p.grad, clipped)


# -- --patience across a resume ----------------------------------------------------------------

@pytest.mark.slow
def test_patience_counts_across_a_resume(reverse_data, tmp_path):
    """fairseq 0.12.2 keeps --patience's count in the process: a run resumed from its checkpoint
    counted afresh (a run resumed every few epochs never stopped early).  With a metric that
    never improves (the valid loss, maximised) and --patience 2, a run resumed after epoch 2
    stops after epoch 3, as an uninterrupted run does (before the shim: after epoch 5)."""
    from conftest import TINY_TRANSFORMER, TRAIN_FLAGS, run_cli

    save = tmp_path / "run"
    options = [reverse_data, *TINY_TRANSFORMER, *TRAIN_FLAGS, "--save-dir", save, "--no-epoch-checkpoints",
               "--best-checkpoint-metric", "loss", "--maximize-best-checkpoint-metric", "--patience", "2"]
    run_cli("fairseq-train", *options, "--max-epoch", "2")
    saved = torch.load(save / "checkpoint_last.pt", map_location="cpu", weights_only=False)["extra_state"]
    assert saved[patches.EARLY_STOP_STATE]["num_runs"] == 1  # epoch 2 was not better than epoch 1
    resumed = run_cli("fairseq-train", *options, "--max-epoch", "10")
    log = resumed.stdout + resumed.stderr
    assert "early stop since valid performance hasn't improved for last 2 runs" in log
    assert re.findall(r"\| valid \| epoch (\d+)", log) == ["003"]


@pytest.mark.slow
def test_patience_counts_afresh_when_fine_tuning_from_another_run(reverse_data, tmp_path):
    """--finetune-from-model starts a new run: the other run's count and best value (e.g. another
    model's best BLEU) must not carry over, or the new run stops after --patience epochs
    however well it does.  Here the other run's best (maximised) loss is its first epoch's,
    which the fine-tuned model does not reach again: counted afresh, it stops after epoch 3."""
    from conftest import TINY_TRANSFORMER, TRAIN_FLAGS, run_cli

    patience = ["--best-checkpoint-metric", "loss", "--maximize-best-checkpoint-metric", "--patience", "2"]
    common = [reverse_data, *TINY_TRANSFORMER, *TRAIN_FLAGS, "--no-epoch-checkpoints", *patience]
    run_cli("fairseq-train", *common, "--save-dir", tmp_path / "other", "--max-epoch", "2")
    tuned = run_cli("fairseq-train", *common, "--save-dir", tmp_path / "tuned", "--max-epoch", "10",
                    "--finetune-from-model", tmp_path / "other" / "checkpoint_last.pt")
    log = tuned.stdout + tuned.stderr
    assert "early stop since valid performance hasn't improved for last 2 runs" in log
    assert re.findall(r"\| valid \| epoch (\d+)", log) == ["001", "002", "003"]


def _add_training_hours(checkpoint, hours):
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    state["extra_state"]["previous_training_time"] += hours * 3600
    torch.save(state, checkpoint)


@pytest.mark.slow
def test_stop_time_counts_from_a_fine_tunes_start_and_on_across_a_resume(reverse_data, tmp_path):
    """fairseq 0.12.2 restores a checkpoint's training time even at the start of
    --finetune-from-model, so fine-tuning a model trained longer than --stop-time-hours stopped
    after one update.  The fine-tune's clock now starts at zero; a resumed run's goes on."""
    from conftest import TINY_TRANSFORMER, TRAIN_FLAGS, run_cli

    common = [reverse_data, *TINY_TRANSFORMER, *TRAIN_FLAGS, "--no-epoch-checkpoints", "--stop-time-hours", "1"]
    run_cli("fairseq-train", *common, "--save-dir", tmp_path / "other", "--max-epoch", "1")
    _add_training_hours(tmp_path / "other" / "checkpoint_last.pt", 2)  # as if it had trained 2 hours
    tuned = run_cli("fairseq-train", *common, "--save-dir", tmp_path / "tuned", "--max-epoch", "2",
                    "--finetune-from-model", tmp_path / "other" / "checkpoint_last.pt")
    log = tuned.stdout + tuned.stderr
    assert "Stopping training due to cumulative_training_time" not in log
    assert re.findall(r"\| valid \| epoch (\d+)", log) == ["001", "002"]
    _add_training_hours(tmp_path / "tuned" / "checkpoint_last.pt", 2)
    resumed = run_cli("fairseq-train", *common, "--save-dir", tmp_path / "tuned", "--max-epoch", "4",
                      "--finetune-from-model", tmp_path / "other" / "checkpoint_last.pt")
    log = resumed.stdout + resumed.stderr
    assert "Stopping training due to cumulative_training_time" in log
    assert re.findall(r"\| valid \| epoch (\d+)", log) == ["003"]


# -- 8. a second training set (train1) with fairseq's default --upsample-primary ----------------

def test_a_second_training_set_loads_with_the_default_upsample_primary(reverse_data, tmp_path):
    for f in reverse_data.iterdir():
        os.symlink(f, tmp_path / f.name)
        if f.name.startswith("train."):
            os.symlink(f, tmp_path / f.name.replace("train.", "train1.", 1))
    task = translation_task(tmp_path)
    assert task.cfg.upsample_primary == -1  # fairseq 0.12's default, which ConcatDataset cannot take
    task.load_dataset("train", combine=True)
    task.load_dataset("valid", combine=True)
    assert len(task.datasets["train"]) == 2 * 600 and len(task.datasets["valid"]) == 40


# -- 9. a data folder fairseq's translation tasks would meet with a traceback ------------------

def test_data_folder_problems_are_plugin_errors_naming_what_is_missing(reverse_data, tmp_path):
    from fairseq_plugins_compat.errors import PluginError

    with pytest.raises(PluginError, match=f"data folder not found: {tmp_path / 'nowhere'}"):
        translation_task(tmp_path / "nowhere")
    os.symlink(reverse_data / "dict.src.txt", tmp_path / "dict.src.txt")
    with pytest.raises(PluginError, match=re.escape(f"{tmp_path}: no dict.tgt.txt")):
        translation_task(tmp_path)
    assert len(translation_task(reverse_data).target_dictionary) > 4  # a good folder loads as before
