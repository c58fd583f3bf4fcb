"""Shims applied to fairseq 0.12.2 modules right after they are imported.

Each ``patch_*`` function is called by the post-import hook of
:mod:`fairseq_plugins_compat.startup` with the freshly imported module, checks the
version that needs it and is a no-op elsewhere.  docs/compatibility.md lists each with its reason.
"""
import argparse
import atexit
import errno
import importlib
import importlib.util
import logging
import os
import queue
import sys
import threading
import time
import types

import torch

from fairseq_plugins_compat import checkpoint_loading
from fairseq_plugins_compat.errors import PluginError

logger = logging.getLogger(__name__)

BT_PARAMETER_NAMES = (
    "in_proj_weight", "in_proj_bias", "out_proj_weight", "out_proj_bias",
    "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias",
)


def is_fairseq_0_12():
    import fairseq

    return fairseq.__version__.startswith("0.12.")


# -- checkpoints: safe torch.load on torch >= 2.6, and the checkpoint's own --user-dir --------

INSTALLED_PLUGINS = ("fairseq_plugins",)  # user dirs that may be replaced by the installed package


class _TorchWithSafeLoad(types.ModuleType):
    """Stands in for ``torch`` inside ``fairseq.checkpoint_utils`` only: ``load`` is the
    allowlisted safe loader, every other attribute is torch's own."""

    def __init__(self):
        super().__init__("torch")

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def load(f, map_location=None, **_ignored):
        path = getattr(f, "name", "<checkpoint>")
        state = checkpoint_loading.safe_load(f, map_location=map_location, path=path)
        if not isinstance(state, dict) or "model" not in state:
            raise checkpoint_loading.CheckpointError(
                f"{path} is not a fairseq checkpoint (expected a dict with a 'model' entry)"
            )
        return state


def _saved_user_dir(state):
    cfg = state.get("cfg") if isinstance(state, dict) else None
    common = cfg.get("common") if cfg is not None else None
    return common.get("user_dir") if common is not None else None


def _import_saved_user_dir(state):
    """fairseq does not import the ``--user-dir`` a checkpoint was trained with.

    A module already imported under the folder's name is kept (e.g. the installed
    ``fairseq_plugins`` while the checkpoint names the clone it was trained in), and a
    ``fairseq_plugins`` folder that no longer exists is replaced by the installed package."""
    from fairseq import utils

    user_dir = _saved_user_dir(state)
    if not user_dir:
        return
    name = os.path.basename(os.path.normpath(user_dir))
    if name in sys.modules:
        return
    if not os.path.exists(user_dir) and name in INSTALLED_PLUGINS and importlib.util.find_spec(name):
        importlib.import_module(name)
        return
    try:
        utils.import_user_module(argparse.Namespace(user_dir=user_dir))
    except (FileNotFoundError, ImportError):
        logger.warning("could not import the checkpoint's user dir %s (pass --user-dir if the model needs it)", user_dir)


def _checked_checkpoint_filename(original):
    """fairseq's shard-name helper, plus one-line errors for a missing or directory path."""

    def get_maybe_sharded_checkpoint_filename(filename, suffix, shard_idx, num_shards):
        resolved = original(filename, suffix, shard_idx, num_shards)
        if "://" not in resolved:  # PathManager's remote paths are left to fairseq
            checkpoint_loading.check_checkpoint_path(resolved)
        return resolved

    return get_maybe_sharded_checkpoint_filename


def patch_checkpoint_utils(module):
    if checkpoint_loading.needs_safe_loading_shim():
        module.torch = _TorchWithSafeLoad()
    if not is_fairseq_0_12():
        return
    original = module.load_checkpoint_to_cpu

    def load_checkpoint_to_cpu(path, arg_overrides=None, load_on_all_ranks=False):
        state = original(path, arg_overrides, load_on_all_ranks)
        _import_saved_user_dir(state)
        return state

    load_checkpoint_to_cpu.__doc__ = original.__doc__
    module.load_checkpoint_to_cpu = load_checkpoint_to_cpu
    module.get_maybe_sharded_checkpoint_filename = _checked_checkpoint_filename(
        module.get_maybe_sharded_checkpoint_filename)
    module.load_checkpoint = _restoring_run_state(module.load_checkpoint, module)


# -- fairseq-train: --patience across a resume, a fine-tune's own clock -------------------------

EARLY_STOP_STATE = "early_stop"  # checkpoint extra-state entry: --patience's best value and count


def _early_stop_counter():
    """``fairseq_cli.train.should_stop_early``, whose function attributes ``best`` and
    ``num_runs`` are --patience's state; None outside fairseq-train."""
    return getattr(sys.modules.get("fairseq_cli.train"), "should_stop_early", None)


def early_stop_state():
    """--patience's state to save with a checkpoint, or None before the first validation."""
    counter = _early_stop_counter()
    if counter is None or getattr(counter, "best", None) is None:
        return None
    return {"best": counter.best, "num_runs": counter.num_runs}


def restore_early_stop(extra_state):
    """fairseq 0.12.2 keeps --patience's count in the process only: a run resumed from its
    checkpoint counted afresh, so one resumed every few epochs never stopped early.  A resumed
    run now goes on counting where its checkpoint left off (checkpoints saved before this
    shim carry no count: counting restarts, as before)."""
    counter = _early_stop_counter()
    saved = (extra_state or {}).get(EARLY_STOP_STATE)
    if counter is None or saved is None or getattr(counter, "best", None) is not None:
        return
    counter.best, counter.num_runs = saved["best"], saved["num_runs"]


def starts_fine_tune(cfg, trainer, path_exists=os.path.exists) -> bool:
    """Whether fairseq's ``load_checkpoint`` is about to start --finetune-from-model: it does
    when the run has no ``checkpoint_last`` of its own yet (fairseq 0.12.2's rule)."""
    if cfg.finetune_from_model is None or cfg.restore_file != "checkpoint_last.pt" \
            or getattr(cfg, "continue_once", None) is not None:
        return False
    return not path_exists(os.path.join(cfg.save_dir, f"checkpoint_last{trainer.checkpoint_suffix}.pt"))


def _restoring_run_state(original, module):
    """The count is restored exactly when fairseq restores its best value: from the run's own
    checkpoint, not from the start of --finetune-from-model or with --reset-meters (a count
    from another run, e.g. another model's best BLEU, would stop this one early).

    The start of --finetune-from-model also sets the training clock back to zero: fairseq
    restores the other run's ``previous_training_time`` whatever it resets, so a fine-tune of a
    checkpoint trained longer than its --stop-time-hours stopped after one update."""
    def load_checkpoint(cfg, trainer, **passthrough_args):
        fine_tuning = starts_fine_tune(cfg, trainer, module.PathManager.exists)
        extra_state, epoch_itr = original(cfg, trainer, **passthrough_args)
        if fine_tuning:
            trainer._previous_training_time = 0  # fairseq's clock: cumulative_training_time()
        # fairseq assigns the loaded object itself (save_checkpoint.best = extra_state["best"]) or nothing
        best = (extra_state or {}).get("best")
        if best is not None and getattr(module.save_checkpoint, "best", None) is best:
            restore_early_stop(extra_state)
        return extra_state, epoch_itr

    load_checkpoint.__doc__ = original.__doc__
    return load_checkpoint


def patch_trainer(module):
    """Every checkpoint fairseq-train saves also carries --patience's state (:func:`restore_early_stop`)."""
    if not is_fairseq_0_12():
        return
    original = module.Trainer.save_checkpoint

    def save_checkpoint(self, filename, extra_state):
        state = early_stop_state()
        if state is not None:
            extra_state = {**extra_state, EARLY_STOP_STATE: state}
        return original(self, filename, extra_state)

    save_checkpoint.__doc__ = original.__doc__
    module.Trainer.save_checkpoint = save_checkpoint


# -- encoder layer: BetterTransformer fast path ----------------------------------------------

def needs_encoder_fastpath_shim(version=None):
    """fairseq's BT path crashes ("Mask Type should be defined") from torch 2.0 on."""
    return checkpoint_loading.torch_version_tuple(version) >= (2, 0)


def patch_transformer_layer(module):
    """Turn off the BetterTransformer fast path of ``TransformerEncoderLayerBase`` and
    drop its eight duplicate parameters, which never receive gradients (they break DDP
    with ``find_unused_parameters=False`` and double the encoder's size on disk).
    Checkpoints that carry them (stock fairseq saves them) still load."""
    if not needs_encoder_fastpath_shim():
        return
    layer_cls = module.TransformerEncoderLayerBase
    original_init = layer_cls.__init__

    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        for name in BT_PARAMETER_NAMES:
            delattr(self, name)
        self.BT_version = False

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        for name in BT_PARAMETER_NAMES:
            state_dict.pop(prefix + name, None)
        torch.nn.Module._load_from_state_dict(self, state_dict, prefix, *args, **kwargs)

    layer_cls.__init__ = __init__
    layer_cls._load_from_state_dict = _load_from_state_dict


# -- distributed training on CPU (gloo) ------------------------------------------------------

def needs_cpu_ddp_shim(version=None):
    """torch 2.x rejects ``device_ids`` for a CPU module; fairseq always passes them."""
    return checkpoint_loading.torch_version_tuple(version) >= (2, 0)


def patch_distributed_model(module):
    if not needs_cpu_ddp_shim():
        return

    class DistributedDataParallel(module.DistributedDataParallel):
        """torch's DDP, minus ``device_ids``/``output_device`` for a module on the CPU."""

        def __init__(self, module, device_ids=None, output_device=None, **kwargs):
            if all(p.device.type == "cpu" for p in module.parameters()):
                device_ids = output_device = None
            super().__init__(module, device_ids=device_ids, output_device=output_device, **kwargs)

    module.DistributedDataParallel = DistributedDataParallel


def patch_distributed_utils(module):
    """When a distributed worker's training returns, wait for every worker, then destroy the
    process group: left to the interpreter's exit, or destroyed while another worker still
    talks to it, gloo's threads can abort a worker after training finished ("terminate called
    without an active exception", seen with torchrun on a busy CPU).  After an exception
    nothing is waited for (the other workers may never arrive)."""
    original = module.distributed_main

    def distributed_main(i, main, cfg, kwargs):
        import torch.distributed as dist

        result = original(i, main, cfg, kwargs)
        if dist.is_available() and dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()
        return result

    module.distributed_main = distributed_main


# -- the thread that makes the next batches ---------------------------------------------------

def _until_stopped(source, stopped: threading.Event):
    """``source``'s items until ``stopped`` is set (checked before each item is made)."""
    iterator = iter(source)
    while not stopped.is_set():
        try:
            item = next(iterator)
        except StopIteration:
            return
        yield item


def stop_prefetching(timeout: float = 30.0):
    """Stop every live batch-making thread and wait for it: each finishes the batch it is making and ends (the
    batches in its queue are dropped, so that a full queue cannot hold it)."""
    deadline = time.monotonic() + timeout
    threads = [thread for thread in threading.enumerate() if hasattr(thread, "stop_making")]  # patched consumers
    for thread in threads:
        thread.stop_making.set()
    for thread in threads:
        while thread.is_alive() and time.monotonic() < deadline:
            try:
                while True:
                    thread._queue.get_nowait()
            except queue.Empty:
                pass
            thread.join(0.05)


def patch_iterators(module):
    """fairseq's ``BufferedIterator`` makes the next batches in a daemon thread. A process that ended while that
    thread was inside a torch call (fairseq-train stopping at --max-update before the queue had filled: a short run
    on a small corpus) aborted after its training had finished and its checkpoint was saved: the interpreter ends
    such a thread with pthread_exit, which unwinds through torch's C++ frames ("terminate called without an active
    exception", exit 134). At exit each such thread now finishes its batch and ends first."""
    if not is_fairseq_0_12():
        return
    original_init = module.BackgroundConsumer.__init__

    def __init__(self, batches, source, max_len, cuda_device):
        self.stop_making = threading.Event()
        original_init(self, batches, _until_stopped(source, self.stop_making), max_len, cuda_device)

    module.BackgroundConsumer.__init__ = __init__
    atexit.register(stop_prefetching)


# -- fairseq-score ---------------------------------------------------------------------------

def patch_score_cli(module):
    from fairseq_plugins_compat import score

    if score.needs_score_shim():
        module.cli_main = score.make_cli_main(module.get_parser)


def _clip_cpu_grad_norm_(grads, expert_grads, max_norm, aggregate_norm_fn):
    """fairseq 0.12.2's ``clip_grad_norm_`` for gradients on the CPU (its device choice kept to the CPU)."""
    total_norm = torch.norm(torch.stack([torch.norm(g, p=2, dtype=torch.float32) for g in grads]))
    if aggregate_norm_fn is not None:
        total_norm = aggregate_norm_fn(total_norm)
    if max_norm > 0:
        clip_coef = (float(max_norm) / (total_norm + 1e-6)).clamp_(max=1)
        for g in grads + expert_grads:
            g.mul_(clip_coef)
    return total_norm


def patch_utils(module):
    """``fairseq.utils.clip_grad_norm_`` sums the gradient norms on the GPU whenever CUDA is
    available, also for a model trained on the CPU (``fairseq-train --cpu``), whose gradients
    it then cannot scale ("Expected all tensors to be on the same device ... cuda:0 and cpu"):
    every CPU recipe with --clip-norm failed on a GPU machine.  CPU gradients are clipped on the CPU."""
    original = module.clip_grad_norm_

    def clip_grad_norm_(params, max_norm, aggregate_norm_fn=None):
        params = [params] if isinstance(params, torch.Tensor) else list(params)
        with_grad = [p for p in params if getattr(p, "grad", None) is not None]
        grads = [p.grad.detach() for p in with_grad if not hasattr(p, "expert")]
        if len(grads) < 2 or grads[0].device.type != "cpu" or not torch.cuda.is_available():
            return original(params, max_norm, aggregate_norm_fn)
        expert_grads = [p.grad.detach() for p in with_grad if hasattr(p, "expert")]
        return _clip_cpu_grad_norm_(grads, expert_grads, max_norm, aggregate_norm_fn)

    clip_grad_norm_.__wrapped__ = original
    module.clip_grad_norm_ = clip_grad_norm_


# -- data folders: several training sets in one; one line for a bad one ----------------------------

def patch_translation(module):
    """fairseq 0.12's ``--upsample-primary`` defaults to -1 (its docs say 1), which
    ``load_langpair_dataset`` hands to ``ConcatDataset`` as the first set's sample ratio: any data
    folder with a second training set (``train1``, e.g. more distilled sources beside the first)
    failed with "negative dimensions are not allowed" (facebookresearch/fairseq#3644).  A ratio
    below 1 now means no upsampling.  And ``TranslationTask.setup_task`` first runs
    :func:`check_data_folder`."""
    original = module.load_langpair_dataset

    def load_langpair_dataset(*args, **kwargs):
        if kwargs.get("upsample_primary", 1) < 1:
            kwargs["upsample_primary"] = 1
        return original(*args, **kwargs)

    load_langpair_dataset.__wrapped__ = original
    module.load_langpair_dataset = load_langpair_dataset
    setup = module.TranslationTask.setup_task.__func__

    def setup_task(cls, cfg, **kwargs):
        check_data_folder(cfg)
        return setup(cls, cfg, **kwargs)

    setup_task.__wrapped__ = setup
    module.TranslationTask.setup_task = classmethod(setup_task)


class DataFolderError(PluginError, FileNotFoundError):
    """A data folder or dictionary that is not there: one line (``str`` is the message alone), and still the
    ``FileNotFoundError`` fairseq raised, ``filename`` the missing path, for code that catches it (a drafter trained
    elsewhere is loaded with the verifier's dictionaries: ``decoding.builder.load_drafter``)."""

    def __init__(self, message: str, missing: str):
        super().__init__(errno.ENOENT, message, missing)

    def __str__(self):
        return self.strerror


def check_data_folder(cfg):
    """What fairseq's translation tasks meet with a traceback, as one line (every command, the harness and the
    API, stock task or the plugin's): the data folder missing, no language pair given or found in its file names,
    a language's dictionary missing.  Remote folders (``scheme://``) are left to fairseq."""
    from fairseq import utils
    from fairseq.data import data_utils

    folder = (utils.split_paths(cfg.data) or [""])[0] if cfg.data else ""
    if "://" in folder:
        return
    if not folder or not os.path.isdir(folder):
        raise DataFolderError(f"data folder not found: {folder or '(none given)'} (the first argument: a folder "
                              "fairseq-preprocess wrote)", folder)
    languages = (cfg.source_lang, cfg.target_lang)
    if None in languages:  # fairseq then takes both from the first binarized file's name
        languages = data_utils.infer_language_pair(folder)
        if None in languages:
            raise DataFolderError(f"{folder}: no SPLIT.SRC-TGT.* files to tell the language pair from; give "
                                  "--source-lang and --target-lang", folder)
    for language in languages:
        dictionary = os.path.join(folder, f"dict.{language}.txt")
        if not os.path.isfile(dictionary):
            raise DataFolderError(f"{folder}: no dict.{language}.txt (the {language} dictionary fairseq-preprocess "
                                  "writes)", dictionary)


# -- dictionaries that do not fit a checkpoint: one line --------------------------------------------

EMBEDDINGS = (("encoder", "embed_tokens", "source"), ("decoder", "embed_tokens", "target"),
              ("decoder", "output_projection", "target"))


class DictionarySizeError(PluginError, RuntimeError):
    """A checkpoint whose embeddings do not fit the dictionaries its model was built with: one line, and still the
    ``RuntimeError`` of ``load_state_dict``, for code that catches it (``decoding.builder.load_drafter``)."""


def patch_dictionary(module):
    """A dictionary loaded from a file remembers it (``loaded_from``), for :func:`embedding_size_problem` to name."""
    original = module.Dictionary.load.__func__

    def load(cls, f):
        dictionary = original(cls, f)
        if isinstance(f, str):
            dictionary.loaded_from = f
        return dictionary

    load.__wrapped__ = original
    module.Dictionary.load = classmethod(load)


def embedding_size_problem(model, state_dict):
    """Where a saved embedding or output layer (V, C) has another number of entries than ``model``'s (built from
    the data folder's dictionaries): what differs, in one line; else None."""
    for side, name, language in EMBEDDINGS:
        part = getattr(model, side, None)
        weight = getattr(getattr(part, name, None), "weight", None)
        saved = state_dict.get(f"{side}.{name}.weight")
        if isinstance(weight, torch.Tensor) and isinstance(saved, torch.Tensor) and saved.dim() == 2 \
                and saved.size(0) != weight.size(0):
            dictionary = getattr(getattr(part, "dictionary", None), "loaded_from", None) or f"the {language} dictionary"
            return (f"the checkpoint's {language} embeddings have {saved.size(0):,} entries, {dictionary} has "
                    f"{weight.size(0):,}: the data folder's dictionaries are not the ones the model was trained with")
    return None


def patch_fairseq_model(module):
    """fairseq's ``load_state_dict`` ends a checkpoint loaded with other dictionaries (another data folder) in a
    ``size mismatch`` traceback: one line instead (:func:`embedding_size_problem`)."""
    original = module.BaseFairseqModel.load_state_dict

    def load_state_dict(self, state_dict, *args, **kwargs):
        try:
            return original(self, state_dict, *args, **kwargs)
        except RuntimeError:
            problem = embedding_size_problem(self, state_dict)
            if problem is None:
                raise
            raise DictionarySizeError(problem) from None

    load_state_dict.__wrapped__ = original
    module.BaseFairseqModel.load_state_dict = load_state_dict
