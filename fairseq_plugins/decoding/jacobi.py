"""Parallel Jacobi decoding (Santilli et al. 2023): PJ, GS-Jacobi (PGJ) and Hybrid (HGJ).

Every iteration re-predicts a block of positions from the previous iterate (the draft);
the positions up to the first disagreement are at their fixed point and become final.

- ``jacobi`` (PJ): one block covering the whole output, up to fairseq's max length.
- ``gs-jacobi`` (PGJ): fixed blocks of ``b`` positions; a block's last prediction is the
  Gauss-Seidel step into the next block.
- ``hybrid-jacobi`` (HGJ): PGJ blocks up to output length ``h``, then one token at a time.

Without an oracle target length, every variant stops when EOS becomes final (or at
fairseq's max length): the EOS is accepted only once the prefix before it is final, so
the output is greedy decoding's.  Positions never predicted yet start as ``init`` (PAD).
"""
from dataclasses import dataclass, field
from typing import Optional

import torch
from fairseq.dataclass import ChoiceEnum

from fairseq_plugins.decoding.builder import build_speculative
from fairseq_plugins.decoding.drafters import Drafter
from fairseq_plugins.decoding.options import REST_OF_INPUT, DraftLengthOptions
from fairseq_plugins.decoding.registry import register_decoder
from fairseq_plugins_compat.errors import PluginError


class JacobiDrafter(Drafter):
    """Drafts the previous iteration's predictions for the current block."""

    verify_every_column = True  # the verifier's choices at every column, pads included, are the next guesses

    def __init__(self, init_token: int, pad: int, block: int = None, hybrid_length: int = None):
        self.init, self.pad = init_token, pad
        self.block = block  # None: one block up to max_len (PJ)
        self.hybrid_length = hybrid_length  # None: never switch to one token at a time

    def start(self, batch):
        self.max_len = batch.max_len
        self.guess = batch.src_tokens.new_full((batch.src_tokens.size(0), 0), self.init)  # (B, G)

    def _block_room(self, lengths):
        """Drafts per row: up to the end of the row's block (B,), 0 once past ``h``."""
        done = lengths - 1  # final tokens, the pending one included
        block = self.block or self.max_len + 1
        block_end = torch.div(done + block, block, rounding_mode="floor") * block  # first multiple of b > done
        room = block_end - done - 1
        if self.hybrid_length is not None:
            room = torch.where(done >= self.hybrid_length, torch.zeros_like(room), room)
        return room

    def propose(self, tokens, lengths, k):
        room = self._block_room(lengths).clamp(max=k)
        width = int(room.max()) if room.numel() else 0
        drafts = tokens.new_full((tokens.size(0), width), self.init)
        known = min(width, self.guess.size(1))
        drafts[:, :known] = self.guess[:, :known]
        columns = torch.arange(width, device=tokens.device).unsqueeze(0)
        return drafts.masked_fill(columns >= room.unsqueeze(1), self.pad)

    def update(self, step):
        """Next iterate: the verifier's predictions after the new final prefix (none after a block without
        drafts: its one choice is final, every position after it starts again from ``init``)."""
        if step.drafts.size(1) == 0:
            self.guess = self.guess[:, :0]
            return
        choices, n_new = step.choices, step.n_new
        width = choices.size(1)
        index = n_new.unsqueeze(1) + torch.arange(width, device=choices.device).unsqueeze(0)
        shifted = choices.gather(1, index.clamp(max=width - 1))
        self.guess = shifted.masked_fill(index >= width, self.init)

    def keep_rows(self, rows):
        self.guess = self.guess.index_select(0, rows)


@dataclass
class JacobiOptions(DraftLengthOptions):
    jacobi_init_token: ChoiceEnum(["pad", "unk"]) = field(
        default="pad", metadata={"help": "Jacobi family: token for positions not yet predicted", "aliases": ("init",)})


@dataclass
class HybridJacobiOptions(JacobiOptions):
    hybrid_length: Optional[int] = field(
        default=None, metadata={"help": "hybrid-jacobi: GS-Jacobi blocks up to this output length h, then "
                                        "autoregressive (default: no limit, i.e. PGJ); 0 = greedy",
                                "aliases": ("h",)})


def _build(name, block, hybrid):
    def build(task, models, args, opts):
        dictionary = task.target_dictionary
        init = {"pad": dictionary.pad(), "unk": dictionary.unk()}[str(opts.jacobi_init_token)]
        b = opts.block_size or block
        h = opts.hybrid_length if hybrid else None
        if h is not None and h < 0:
            raise PluginError(f"--hybrid-length must be >= 0, got {h}")
        drafter = JacobiDrafter(init, dictionary.pad(), block=b, hybrid_length=h)
        return build_speculative(task, models, args, name, drafter, opts, block_size=b or REST_OF_INPUT)

    return build


register_decoder("jacobi", "parallel Jacobi (PJ): the whole output re-predicted per iteration, the output of --beam 1",
                 JacobiOptions)(_build("jacobi", None, hybrid=False))
register_decoder("gs-jacobi", "parallel GS-Jacobi (PGJ): blocks of --block-size (default 3), the output of --beam 1",
                 JacobiOptions)(_build("gs-jacobi", 3, hybrid=False))
register_decoder("hybrid-jacobi", "hybrid GS-Jacobi (HGJ): PGJ up to --hybrid-length, then autoregressive",
                 HybridJacobiOptions)(_build("hybrid-jacobi", 3, hybrid=True))
