"""Tiny random fairseq transformers and batches for decoding tests (no training)."""
import argparse

import torch
from fairseq.data import Dictionary
from fairseq.models.transformer import TransformerModel, base_architecture


def make_dictionary(n_words=20):
    dictionary = Dictionary()
    for i in range(n_words):
        dictionary.add_symbol(f"w{i}")
    return dictionary


class DictTask:
    """The two attributes ``build_model`` reads from a translation task."""

    def __init__(self, dictionary):
        self.source_dictionary = self.target_dictionary = dictionary


def build_transformer(dictionary, seed=0, layers=2, dim=16, heads=2, learned_pos=False,
                      normalize_before=False, max_positions=64, eos_boost=0.0, dtype=torch.float64):
    """A randomly initialised 2-layer transformer; ``eos_boost`` scales the EOS output
    embedding so that sentences end at varied lengths."""
    args = argparse.Namespace(
        encoder_layers=layers, decoder_layers=layers, encoder_embed_dim=dim, decoder_embed_dim=dim,
        encoder_ffn_embed_dim=2 * dim, decoder_ffn_embed_dim=2 * dim,
        encoder_attention_heads=heads, decoder_attention_heads=heads,
        encoder_learned_pos=learned_pos, decoder_learned_pos=learned_pos,
        encoder_normalize_before=normalize_before, decoder_normalize_before=normalize_before,
        share_all_embeddings=True, dropout=0.0,
        max_source_positions=max_positions, max_target_positions=max_positions,
    )
    base_architecture(args)
    torch.manual_seed(seed)
    model = TransformerModel.build_model(args, DictTask(dictionary))
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 1.0 / dim ** 0.5)
        model.decoder.embed_tokens.weight[dictionary.eos()] *= 1.0 + eos_boost
    return model.to(dtype).eval()


def make_batch(dictionary, lengths, seed=0):
    """Left-padded source batch as fairseq's LanguagePairDataset builds it."""
    g = torch.Generator().manual_seed(seed)
    n_special = dictionary.nspecial
    max_len = max(lengths) + 1
    src = torch.full((len(lengths), max_len), dictionary.pad(), dtype=torch.long)
    for i, n in enumerate(lengths):
        words = torch.randint(n_special, len(dictionary), (n,), generator=g)
        src[i, max_len - n - 1:] = torch.cat([words, torch.tensor([dictionary.eos()])])
    return {"id": torch.arange(len(lengths)), "net_input": {"src_tokens": src, "src_lengths": torch.tensor(lengths) + 1}}


def round_to_half(model):
    """The model with every weight rounded to the nearest float16 number, kept in its dtype (what
    ``export_checkpoint --fp16`` and loading back give): ``HalfWeightLinears`` then stores its
    weights as float16 instead of falling back."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.half().to(p.dtype))
    return model
