"""``--print-alignment hard|soft`` for the plugin's decoders.

fairseq's ``SequenceGeneratorWithAlignment`` reads, for each output token, the encoder attention of the
verifier's last decoder layer averaged over its heads, as computed while that token was chosen, and
turns it into an alignment with ``fairseq.utils.extract_hard_alignment`` (or ``_soft_``).  The plugin's
decoders choose tokens in blocks with lean layers that compute no attention weights, so the same
attention is computed afterwards by one teacher-forced pass of the verifier (a fairseq model) over each
finished output: the same numbers up to floating-point rounding, turned into alignments by the same
fairseq functions.  Only when asked for: it is one more pass of the verifier per batch.
"""
from typing import List

import torch
from fairseq import utils
from fairseq.data import data_utils


class AlignedGenerator:
    """A plugin generator whose hypotheses get fairseq's ``attention`` ((S, T): source positions x output
    tokens, EOS included) and ``alignment`` (``print_alignment`` "hard": (source, target) token index
    pairs; "soft": one list of source probabilities per output token)."""

    def __init__(self, generator, model, tgt_dict, print_alignment: str):
        self.generator, self.model = generator, model
        self.pad, self.eos = tgt_dict.pad(), tgt_dict.eos()
        self.extract = utils.extract_soft_alignment if print_alignment == "soft" else utils.extract_hard_alignment

    def __getattr__(self, name):  # the wrapped decoder's attributes (its name, stats, ...)
        return getattr(self.generator, name)

    def generate(self, models, sample, **kwargs) -> List[List[dict]]:
        finalized = self.generator.generate(models, sample, **kwargs)
        hypos = [hypo for sentence in finalized for hypo in sentence[:1]]
        if len(hypos) != len(finalized):  # a sentence without a hypothesis: nothing to align it with
            return finalized
        for hypo, attn, src, tgt in zip(hypos, *self.attention(sample, [h["tokens"] for h in hypos])):
            hypo["attention"] = attn.t()  # (S, T) as fairseq's
            hypo["alignment"] = self.extract(attn, src, tgt, self.pad, self.eos)
        return finalized

    @torch.no_grad()
    def attention(self, sample, outputs: List[torch.Tensor]):
        """outputs: each sentence's tokens (T_i,), EOS last -> per sentence its attention (T_i, S), its
        source (S,) and its tokens, all on the CPU."""
        net_input = sample["net_input"]
        src_tokens = net_input["src_tokens"]
        device = src_tokens.device
        prev = data_utils.collate_tokens(outputs, self.pad, self.eos, left_pad=False, move_eos_to_beginning=True)
        _, extra = self.model(src_tokens, net_input["src_lengths"], prev.to(device))
        attn = extra["attn"][0].float().cpu()  # (B, T, S)
        return ([attn[i, :len(tokens)] for i, tokens in enumerate(outputs)], src_tokens.cpu(),
                [tokens.cpu() for tokens in outputs])


def with_alignments(generator, model, tgt_dict, print_alignment):
    """``generator`` itself unless ``--print-alignment`` asks for alignments."""
    if not print_alignment:
        return generator
    return AlignedGenerator(generator, model, tgt_dict, str(print_alignment))
