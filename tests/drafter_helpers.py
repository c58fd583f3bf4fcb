"""Tiny block drafters and verifiers built in-process (no training), for drafter tests."""
import argparse

import torch
from fairseq.models.transformer import TransformerModel

from fairseq_plugins.models.block_drafter import BlockDrafterModel, tiny_drafter_architecture
from fairseq_plugins.models.verifier_archs import specdec_verifier_tiny
from tiny_models import DictTask, make_dictionary  # noqa: F401  (re-exported for the drafter tests)


def build_drafter(dictionary, seed=0, **options):
    """``block_drafter_tiny`` (dropout 0) with ``options`` overriding the preset."""
    args = argparse.Namespace(arch="block_drafter_tiny", dropout=0.0, **options)
    tiny_drafter_architecture(args)
    torch.manual_seed(seed)
    return BlockDrafterModel.build_model(args, DictTask(dictionary)).eval()


def drafter_with_head(dictionary, seed, **options):
    """A tiny drafter with a sequential head far from the identity that depends much on the previous token (large
    random W1 and W2), so that it drafts otherwise than the block."""
    drafter = build_drafter(dictionary, seed=seed, sequential_head=True, **options)
    torch.manual_seed(seed)
    torch.nn.init.normal_(drafter.decoder.sequential_head.inner.weight, std=30.0)  # embeddings are ~N(0, 0.02)
    torch.nn.init.normal_(drafter.decoder.sequential_head.outer.weight, std=10.0)
    return drafter


def drafter_args(dropout=0.0, **options):
    """``block_drafter_tiny`` arguments with ``options`` overriding the preset."""
    args = argparse.Namespace(arch="block_drafter_tiny", dropout=dropout, **options)
    tiny_drafter_architecture(args)
    return args


def load_verifier(checkpoint):
    """(verifier model in eval mode, its source dictionary) from a trained checkpoint."""
    from fairseq import checkpoint_utils

    models, _cfg, task = checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)])
    return models[0].eval(), task.source_dictionary


def build_verifier(dictionary, seed=0, **options):
    """``specdec_verifier_tiny`` (dropout 0) with ``options`` overriding the preset."""
    args = argparse.Namespace(arch="specdec_verifier_tiny", dropout=0.0, **options)
    specdec_verifier_tiny(args)
    torch.manual_seed(seed)
    return TransformerModel.build_model(args, DictTask(dictionary)).eval()


def random_batch(dictionary, src_lengths, prefix_lengths, seed=0):
    """Left-padded sources (B, S) ending in eos and right-padded prefixes (B, P) starting
    with eos, of the given real lengths (prefix lengths count the leading eos)."""
    g = torch.Generator().manual_seed(seed)
    pad, eos, low, high = dictionary.pad(), dictionary.eos(), dictionary.nspecial, len(dictionary)
    src = torch.full((len(src_lengths), max(src_lengths)), pad)
    for i, n in enumerate(src_lengths):
        src[i, -n:] = torch.cat([torch.randint(low, high, (n - 1,), generator=g), torch.tensor([eos])])
    prefix = torch.full((len(prefix_lengths), max(prefix_lengths)), pad)
    for i, n in enumerate(prefix_lengths):
        prefix[i, :n] = torch.cat([torch.tensor([eos]), torch.randint(low, high, (n - 1,), generator=g)])
    return src, torch.tensor(src_lengths), prefix, torch.tensor(prefix_lengths)
