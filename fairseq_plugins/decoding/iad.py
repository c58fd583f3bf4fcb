"""Input-guided Aggressive Decoding (IAD; Sun et al. 2021, Ge et al. 2022 Algorithm 1).

The draft is a copy of the source: if the last ``match_length`` output tokens occur
exactly once in the source, the tokens that follow that occurrence are drafted; else
nothing is drafted and the verifier decodes one token (until the suffix matches again).
The output is greedy decoding's, for any model (typically GEC, where output ~ input).
"""
from dataclasses import dataclass, field
from typing import List

import torch

from fairseq_plugins.decoding.builder import build_speculative
from fairseq_plugins.decoding.drafters import Drafter
from fairseq_plugins.decoding.options import REST_OF_INPUT, DraftLengthOptions
from fairseq_plugins.decoding.registry import register_decoder
from fairseq_plugins_compat.errors import PluginError

BOS = -1  # stands for the decoder's BOS (fairseq's eos at column 0) and the source's start


def unique_suffix_continuation(output: List[int], source: List[int], match_length: int, k: int) -> List[int]:
    """Source tokens after the unique occurrence of ``output``'s suffix, at most ``k``.

    Both sequences start with ``BOS``; the suffix is the last ``match_length`` tokens of
    ``output`` (fewer at the very start).  Returns [] when the suffix occurs 0 or 2+ times.
    """
    suffix = output[-match_length:]
    n = len(suffix)
    ends = [i + n for i in range(len(source) - n + 1) if source[i: i + n] == suffix]
    return source[ends[0]: ends[0] + k] if len(ends) == 1 else []


class SourceCopyDrafter(Drafter):
    """Drafts a continuation copied from the source (see module docstring)."""

    def __init__(self, pad: int, match_length: int = 1):
        self.pad, self.match_length = pad, match_length

    def start(self, batch):
        self.sources = [[BOS] + [t for t in row if t != self.pad] for row in batch.src_tokens.tolist()]

    def propose(self, tokens, lengths, k):
        drafts = []
        filled = tokens[:, : int(lengths.max())].tolist()  # not the pad tail of the state buffer
        for row, (prefix, n) in enumerate(zip(filled, lengths.tolist())):
            output = [BOS] + prefix[1:n]
            drafts.append(unique_suffix_continuation(output, self.sources[row], self.match_length, k))
        width = max(map(len, drafts))
        out = tokens.new_full((len(drafts), width), self.pad)
        for i, draft in enumerate(drafts):
            out[i, : len(draft)] = torch.tensor(draft, dtype=out.dtype)
        return out

    def keep_rows(self, rows):
        self.sources = [self.sources[i] for i in rows.tolist()]


@dataclass
class IADOptions(DraftLengthOptions):
    iad_match_length: int = field(
        default=1, metadata={"help": "IAD: output suffix length that must occur exactly once in the source",
                             "aliases": ("match_length",)})


@register_decoder("iad", "input-guided aggressive decoding: draft = copy of the source (GEC), the output of --beam 1",
                  IADOptions)
def build_iad(task, models, args, opts):
    if opts.iad_match_length < 1:
        raise PluginError(f"--iad-match-length must be >= 1, got {opts.iad_match_length}")
    drafter = SourceCopyDrafter(task.target_dictionary.pad(), opts.iad_match_length)
    return build_speculative(task, models, args, "iad", drafter, opts, opts.block_size or REST_OF_INPUT)
