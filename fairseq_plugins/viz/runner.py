"""Shared by the viz commands: options, loading the task and models, picking sentences
and decoding them one at a time with the draft/verify trace kept.

Models are loaded with fairseq's ``checkpoint_utils.load_model_ensemble_and_task`` under
the plugin's ``speculative_translation`` task; the generator comes from
``task.build_generator``, i.e. the registered ``--decoding`` builders.
"""
import argparse
import os
from typing import Callable, List

import torch

from fairseq_plugins.viz.steps import SentenceTrace
from fairseq_plugins_compat.cli import missing_split_as_error
from fairseq_plugins_compat.errors import PluginError, exit_on_plugin_error

NO_TRACE = ("beam", "drafter-only")  # decoders without a draft/verify loop


def decoder_choices() -> List[str]:
    import fairseq_plugins  # noqa: F401  (registers the decoders)
    from fairseq_plugins.decoding.registry import decoder_names

    return [name for name in decoder_names() if name not in NO_TRACE]


def add_common_args(parser: argparse.ArgumentParser, default_decoding: str):
    """Options shared by ``trace`` and ``ddgviz``."""
    parser.add_argument("data", help="fairseq data dir (binarized, with the dictionaries)")
    parser.add_argument("--path", required=True, help="verifier checkpoint (fairseq-train output)")
    parser.add_argument("--drafter-path", help="block NAT drafter checkpoint (--decoding specdec, specdec++)")
    parser.add_argument("--decoding", default=default_decoding, choices=decoder_choices(),
                        help=f"speculative decoder to trace (default: {default_decoding})")
    parser.add_argument("--block-size", type=int, help="tokens drafted per iteration (default: the decoder's own)")
    parser.add_argument("--beta", type=int, help="SpecDec++ top-beta")
    parser.add_argument("--tau", type=float, help="SpecDec++ log-probability tolerance")
    parser.add_argument("--iad-match-length", type=int, default=1, help="IAD: suffix length to match in the source")
    parser.add_argument("--hybrid-length", type=int, help="hybrid-jacobi: GS-Jacobi up to this output length")
    parser.add_argument("--jacobi-init-token", choices=["pad", "unk"], default="pad",
                        help="Jacobi family: token for positions not yet predicted")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--ids", type=int, nargs="+", help="sentence ids of --gen-subset")
    which.add_argument("--input", nargs="+", metavar="SENTENCE",
                       help="raw source sentences (tokenized as the dictionary expects, e.g. BPE applied)")
    parser.add_argument("--gen-subset", default="test", help="split the --ids refer to (default: test)")
    parser.add_argument("-s", "--source-lang", help="source language (default: inferred from the data dir)")
    parser.add_argument("-t", "--target-lang", help="target language (default: inferred from the data dir)")
    parser.add_argument("--max-len-a", type=float, default=0.0, help="max output length: a * source length + b")
    parser.add_argument("--max-len-b", type=int, default=200, help="max output length: a * source length + b")
    parser.add_argument("--cpu", action="store_true", help="decode on CPU even if CUDA is available")
    parser.add_argument("--out", required=True, help="output prefix (directories are created)")


def load(args):
    """(task, verifier, generator) for the parsed options; bad paths are PluginErrors."""
    from fairseq import checkpoint_utils, tasks
    from omegaconf import OmegaConf

    import fairseq_plugins  # noqa: F401

    for option, path in (("--path", args.path), ("--drafter-path", args.drafter_path)):
        if path and not os.path.isfile(path):
            raise PluginError(f"{option} {path}: no such checkpoint file")
    task_cfg = OmegaConf.create({
        "_name": "speculative_translation", "data": str(args.data), "source_lang": args.source_lang,
        "target_lang": args.target_lang, "decoding": args.decoding, "drafter_path": args.drafter_path,
        "block_size": args.block_size, "beta": args.beta, "tau": args.tau,
        "iad_match_length": args.iad_match_length, "hybrid_length": args.hybrid_length,
        "jacobi_init_token": args.jacobi_init_token,
        # fairseq's interpolations into the (absent) dataset config, spelled out
        "train_subset": "train", "dataset_impl": None, "required_seq_len_multiple": 1,
    })
    task = tasks.setup_task(task_cfg)
    models, _cfg, task = checkpoint_utils.load_model_ensemble_and_task([args.path], task=task)
    device = "cuda" if torch.cuda.is_available() and not args.cpu else "cpu"
    verifier = models[0].to(device).eval()
    generation = argparse.Namespace(beam=1, nbest=1, max_len_a=args.max_len_a, max_len_b=args.max_len_b,
                                    min_len=1, lenpen=1.0, unkpen=0.0, unnormalized=False)
    generator = task.build_generator([verifier], generation)
    return task, verifier, generator


def enable_trace(generator):
    """Make the speculative generator keep its per-iteration trace."""
    stats = getattr(generator, "stats", None)
    if stats is None or not hasattr(generator, "drafter"):
        raise PluginError(f"{type(generator).__name__} has no draft/verify loop to trace")
    stats.keep_trace = True


def traced_decode(generator, sample: dict) -> List[SentenceTrace]:
    """Decode ``sample`` (fairseq batch) with the trace kept: one SentenceTrace per row.

    src_tokens (B, S) are left- or right-padded; the output of each row is its best
    hypothesis' tokens, the steps those the core recorded for the row."""
    enable_trace(generator)
    hypos = generator.generate([generator.verifier], sample)
    trace = generator.stats.traces[-1]
    pad = generator.pad
    src = sample["net_input"]["src_tokens"]
    ids = sample["id"].tolist() if "id" in sample else list(range(src.size(0)))
    return [SentenceTrace(ids[row], [t for t in src[row].tolist() if t != pad],
                          hypos[row][0]["tokens"].tolist(), list(trace.steps[row]))
            for row in range(src.size(0))]


def select_samples(task, args) -> List[tuple]:
    """(sentence id, one-sentence batch) for ``--ids`` of ``--gen-subset`` or ``--input``."""
    if args.input:
        dictionary = task.source_dictionary
        tokens = [dictionary.encode_line(s, add_if_not_exist=False, append_eos=True).long() for s in args.input]
        dataset = task.build_dataset_for_inference(tokens, [len(t) for t in tokens])
        return [(f"input{i}", dataset.collater([dataset[i]])) for i in range(len(tokens))]
    with missing_split_as_error(args.gen_subset):
        task.load_dataset(args.gen_subset)
    dataset = task.dataset(args.gen_subset)
    for i in args.ids:
        if not 0 <= i < len(dataset):
            raise PluginError(f"unknown sentence id {i}: --gen-subset {args.gen_subset} has ids 0..{len(dataset) - 1}")
    return [(i, dataset.collater([dataset[i]])) for i in args.ids]


def decode_selected(args) -> tuple:
    """(task, [SentenceTrace]) for the parsed options; each sentence decoded alone, so
    every drafted block is the sentence's own (no padding from other rows)."""
    from fairseq.utils import resolve_max_positions

    task, verifier, generator = load(args)
    device = next(verifier.parameters()).device
    max_source = resolve_max_positions(task.max_positions(), verifier.max_positions())[0]
    sentences = []
    for sentence_id, sample in select_samples(task, args):
        if sample["net_input"]["src_tokens"].size(1) > max_source:
            raise PluginError(f"sentence {sentence_id}: {sample['net_input']['src_tokens'].size(1)} source tokens, "
                              f"more than the models' max source positions ({max_source})")
        sample = {**sample, "net_input": {k: v.to(device) for k, v in sample["net_input"].items()}}
        traced = traced_decode(generator, sample)[0]
        traced.sentence_id = sentence_id
        traced.source_text = task.source_dictionary.string(torch.tensor(traced.source))
        sentences.append(traced)
    return task, sentences


def out_path(prefix: str, suffix: str) -> str:
    directory = os.path.dirname(prefix)
    if directory:
        os.makedirs(directory, exist_ok=True)
    return f"{prefix}{suffix}"


def run_main(main: Callable, parser: argparse.ArgumentParser, argv=None):
    """Run ``main(args)``; a PluginError is printed as one line (exit status 1)."""
    args = parser.parse_args(argv)
    exit_on_plugin_error(lambda: main(args), parser.prog)
