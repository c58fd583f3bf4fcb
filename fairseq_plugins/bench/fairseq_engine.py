"""The verifier and the test set, loaded once under the plugin task, and the fairseq
generators built from them through ``task.build_generator`` (one per decoder spec).

The fairseq configuration comes from fairseq's own generation parser, so every
fairseq-generate option (``--source-lang``, ``--max-len-b``, ``--lenpen``, ``--tokenizer``,
``--bpe``, ``--post-process``...) means here what it means to fairseq-generate.
"""
import ast
import os
from typing import Dict, List, Optional, Tuple

import torch

from fairseq_plugins.bench import decoders as decoder_specs
from fairseq_plugins.bench.timing import Batch, Output
from fairseq_plugins.inference import length_sorted_batches
from fairseq_plugins_compat.cli import missing_split_as_error

PLUGIN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TASK = "speculative_translation"


def fairseq_config(data: str, path: str, gen_subset: str, device: str, fp16: bool,
                   post_process: Optional[str], extra: List[str], task: str = TASK):
    """fairseq's config (``cfg.task``, ``cfg.generation``...) as fairseq-generate would parse it."""
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    argv = [data, "--user-dir", PLUGIN_DIR, "--task", task, "--path", path, "--gen-subset", gen_subset, *extra]
    if post_process:
        argv += ["--post-process", post_process]
    argv += ["--cpu"] if device == "cpu" else []
    argv += ["--fp16"] if fp16 else []
    parser = options.get_generation_parser(default_task=task)
    return convert_namespace_to_omegaconf(options.parse_args_and_arch(parser, argv))


def config_for_path(cfg, path: str):
    """A copy of ``cfg`` (from ``fairseq_config``) for the checkpoint ``path``: what
    ``fairseq_config`` returns for ``path`` with the same other arguments, without its
    second parse (a hydra compose, ~0.9 s CPU); ``--path`` reaches only ``common_eval.path``."""
    import copy

    cfg = copy.deepcopy(cfg)
    cfg.common_eval.path = path
    return cfg


class FairseqEngine:
    """Task, verifier and test set; builds and runs one generator per decoder spec."""

    def __init__(self, cfg, device: str, fp16: bool):
        from fairseq import checkpoint_utils, tasks, utils

        utils.import_user_module(cfg.common)
        self.cfg, self.device = cfg, device
        self.task = tasks.setup_task(cfg.task)
        overrides = ast.literal_eval(cfg.common_eval.model_overrides)
        paths = utils.split_paths(cfg.common_eval.path)
        self.models, saved_cfg, _ = checkpoint_utils.load_model_ensemble_and_task(
            paths, arg_overrides=overrides, task=self.task)
        with missing_split_as_error(cfg.dataset.gen_subset):
            self.task.load_dataset(cfg.dataset.gen_subset, task_cfg=saved_cfg.task)
        self.dataset = self.task.dataset(cfg.dataset.gen_subset)
        for model in self.models:
            model.eval()
            if fp16:
                model.half()
            model.to(device)
            model.make_generation_fast_(beamable_mm_beam_size=None, need_attn=False)
        self.tokenizer = self.task.build_tokenizer(cfg.tokenizer)
        self.bpe = self.task.build_bpe(cfg.bpe)
        self.src_dict, self.tgt_dict = self.task.source_dictionary, self.task.target_dictionary
        self.base_task_fields = decoder_specs.task_defaults(self.task)

    # -- data ------------------------------------------------------------------------------

    def sentence_ids(self, max_sentences: int = 0) -> Tuple[List[int], List[int]]:
        """The first ``max_sentences`` sentences of the split (all with 0) that fit the
        models' max source positions, and the ones that do not (as fairseq-generate's
        --skip-invalid-size-inputs-valid-test would drop them)."""
        from fairseq import utils

        n = len(self.dataset)
        ids = list(range(min(n, max_sentences) if max_sentences else n))
        limit = utils.resolve_max_positions(self.task.max_positions(), *[m.max_positions() for m in self.models])
        max_source = limit[0] if isinstance(limit, tuple) else limit
        if max_source is None:
            return ids, []
        too_long = [i for i in ids if int(self.dataset.src_sizes[i]) > max_source]
        return [i for i in ids if int(self.dataset.src_sizes[i]) <= max_source], too_long

    def source_lengths(self, ids: List[int]) -> Dict[int, int]:
        return {i: int(self.dataset.src_sizes[i]) for i in ids}

    def batches(self, ids: List[int], batch_size: int) -> List[Batch]:
        """Collated samples (on the device), length-sorted batches of ``batch_size``."""
        from fairseq import utils

        batches = []
        ids = sorted(ids)  # ties of length in id order
        lengths = self.source_lengths(ids)
        for positions in length_sorted_batches([lengths[i] for i in ids], batch_size):
            group = [ids[p] for p in positions]
            sample = self.dataset.collater([self.dataset[i] for i in group])
            if self.device == "cuda":
                sample = utils.move_to_cuda(sample)
            batches.append(Batch(ids=sample["id"].tolist(), payload=sample))
        return batches

    def detokenize(self, text: str) -> str:
        """fairseq-generate's D- line: --post-process, then --bpe and --tokenizer decoding."""
        from fairseq.data.data_utils import post_process

        text = post_process(text, self.cfg.common_eval.post_process)
        if self.bpe is not None:
            text = self.bpe.decode(text)
        if self.tokenizer is not None:
            text = self.tokenizer.decode(text)
        return text

    def references(self, ids: List[int]) -> Optional[Dict[int, str]]:
        """Detokenized reference of each sentence (None without a target side)."""
        if getattr(self.dataset, "tgt", None) is None:
            return None
        pp = self.cfg.common_eval.post_process
        return {i: self.detokenize_ref(self.tgt_dict.string(self.dataset[i]["target"], pp, escape_unk=True))
                for i in ids}

    def detokenize_ref(self, text: str) -> str:
        """A reference already through ``--post-process``: only --bpe / --tokenizer decoding."""
        if self.bpe is not None:
            text = self.bpe.decode(text)
        return self.tokenizer.decode(text) if self.tokenizer is not None else text

    def source_symbols(self, sentence_id: int) -> List[str]:
        """Source subword symbols without EOS (CTranslate2's input)."""
        ignore = {self.src_dict.eos(), self.src_dict.pad()}
        return [self.src_dict[t] for t in self.dataset[sentence_id]["source"].tolist() if t not in ignore]

    # -- decoding --------------------------------------------------------------------------

    def build_generator(self, spec, drafter_path: Optional[str]):
        """The task's generator for ``spec`` (task cfg and --beam set first)."""
        decoder_specs.configure(self.task, self.cfg.generation, spec, self.base_task_fields, drafter_path)
        return self.task.build_generator(self.models, self.cfg.generation)

    def runner(self, generator):
        """``run(batch)``: the timed call."""
        def run(batch: Batch):
            return self.task.inference_step(generator, self.models, batch.payload)

        return run

    def outputs(self, spec):
        """``outputs(hypos, batch)``: one ``Output`` per sentence, after the clock."""
        eos = self.tgt_dict.eos()

        def convert(hypos, batch: Batch) -> List[Output]:
            return [self._output(h[0], eos, spec.is_greedy_search) for h in hypos]

        return convert

    def _output(self, hypo: dict, eos: int, greedy: bool) -> Output:
        tokens = hypo["tokens"].int().cpu().tolist()
        symbols = [self.tgt_dict[t] for t in tokens if t != eos]
        if "steps" in hypo:
            steps = int(hypo["steps"])
            accepted = sum(hypo["accepted_per_iteration"]) if "accepted_per_iteration" in hypo else len(tokens)
            return Output(symbols, steps, int(accepted), tokens)
        if greedy:  # one decoder step per output token, EOS included
            return Output(symbols, len(tokens), len(tokens), tokens)
        return Output(symbols, tokens=tokens)


def hardware(device: str, threads: int) -> Dict[str, object]:
    """What the numbers were measured on."""
    import platform

    import fairseq

    info = {"device": device, "threads": threads, "torch": torch.__version__, "fairseq": fairseq.__version__,
            "python": platform.python_version(), "cpu": cpu_model()}
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name()
        info["cuda"] = torch.version.cuda
    return info


def cpu_model() -> str:
    """CPU model name from /proc/cpuinfo (Linux), else platform's guess."""
    import platform

    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"
