"""Training batches in decoding order: wraps fairseq's ``LanguagePairDataset``.

``sample["target"]`` keeps the natural order (``fairseq-generate`` and ``--eval-bleu`` read
references from it); the decoding-order target is ``sample[DECODING_TARGET]``, which the
double-token model returns from ``get_targets()``, so stock criterions train on it.
"""
import torch
from fairseq.data import BaseWrapperDataset

from fairseq_plugins.double_token.reorder import TOKENS_PER_STEP, to_decoding_order

DECODING_TARGET = "decoding_target"


def start_tokens(dictionary, order):
    """Decoder input of the first step: ``(bos, eos)`` for pairs (paper's ``y_L0, y_R0``), ``eos`` for single tokens."""
    if TOKENS_PER_STEP[order] == 2:
        return [dictionary.bos(), dictionary.eos()]
    return [dictionary.eos()]


def reorder_targets(target, order, dictionary):
    """Natural targets -> decoding order.

    target: LongTensor ``(B, T)``, right-padded rows ``y_1 .. y_n eos``.
    Returns LongTensor ``(B, T')``, right-padded rows ``to_decoding_order(y)`` (EOD = eos).
    """
    pad, eos = dictionary.pad(), dictionary.eos()
    rows = []
    for row in target.tolist():
        tokens = [t for t in row if t != pad]
        if tokens and tokens[-1] == eos:
            tokens = tokens[:-1]
        rows.append(to_decoding_order(tokens, order, eod=eos))
    width = max(map(len, rows))
    out = target.new_full((len(rows), width), pad)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=out.dtype)
    return out


def decoder_inputs(target, order, dictionary):
    """Teacher-forcing inputs: the start unit, then the target shifted right by one unit.

    target: LongTensor ``(B, T)`` in decoding order, right-padded, ``T`` a multiple of k.
    Returns LongTensor ``(B, T)``; position ``j`` holds the input token of target ``j``.
    """
    start = start_tokens(dictionary, order)
    k = len(start)
    first = target.new_tensor(start).expand(target.size(0), k)
    shifted = torch.cat([first, target[:, :-k]], dim=1)
    return shifted.masked_fill(target.eq(dictionary.pad()), dictionary.pad())


class DecodingOrderDataset(BaseWrapperDataset):
    """A ``LanguagePairDataset`` whose batches also carry decoding-order targets/inputs."""

    def __init__(self, dataset, order, dictionary):
        super().__init__(dataset)
        self.order = order
        self.dictionary = dictionary

    @property
    def src(self):
        return self.dataset.src

    @property
    def tgt(self):
        return self.dataset.tgt

    @property
    def src_sizes(self):
        return self.dataset.src_sizes

    def collater(self, samples):
        batch = self.dataset.collater(samples)
        if not batch or batch.get("target") is None:
            return batch
        target = reorder_targets(batch["target"], self.order, self.dictionary)
        batch["net_input"]["prev_output_tokens"] = decoder_inputs(target, self.order, self.dictionary)
        batch[DECODING_TARGET] = target
        batch["ntokens"] = int(target.ne(self.dictionary.pad()).sum())
        return batch
