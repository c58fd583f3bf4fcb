"""``--decoding drafter-only``: the block drafter decodes alone, every drafted block
accepted (the SpecDec paper's "NAT drafter" row)."""
from dataclasses import dataclass

import torch

from fairseq_plugins.decoding import options
from fairseq_plugins.decoding.builder import load_drafter, log_stats_at_exit
from fairseq_plugins.decoding.drafters import BatchStart
from fairseq_plugins.decoding.registry import register_decoder
from fairseq_plugins.decoding.specdec import BlockDrafter
from fairseq_plugins.decoding.stats import DecodingStats


@dataclass
class DrafterOnlyOptions(options.DrafterPathOptions, options.BlockSizeOptions, options.HeadCandidatesOptions):
    """The drafter's checkpoint, its block size and its sequential head's candidates."""


class DrafterOnlyGenerator:
    """Accept every drafted block: the drafter decodes alone (block by block)."""

    def __init__(self, drafter_model, tgt_dict, block_size, args, head_candidates=options.HEAD_CANDIDATES):
        self.drafter = BlockDrafter(drafter_model, head_candidates=head_candidates)
        self.block_size = block_size
        self.eos, self.pad = tgt_dict.eos(), tgt_dict.pad()
        self.args = args
        self.stats = DecodingStats()

    @torch.no_grad()
    def generate(self, models, sample, **kwargs):
        src_tokens, src_lengths = sample["net_input"]["src_tokens"], sample["net_input"]["src_lengths"]
        max_len_a, max_len_b = getattr(self.args, "max_len_a", 0.0), getattr(self.args, "max_len_b", 200)
        max_len = min(int(max_len_a * src_tokens.size(1) + max_len_b),
                      self.drafter.model.max_positions()[1] - 1)
        self.drafter.start(BatchStart(src_tokens, src_lengths, max_len, encoder_out=None))
        bsz = src_tokens.size(0)
        tokens = src_tokens.new_full((bsz, max_len + self.block_size + 2), self.pad)
        tokens[:, 0] = self.eos
        lengths = src_tokens.new_ones(bsz)
        while int(lengths.max()) <= max_len and not bool(self._finished(tokens).all()):
            k = min(self.block_size, max_len + 1 - int(lengths.max()))  # every row has the same length
            drafts = self.drafter.propose(tokens, lengths, k).tokens
            columns = lengths.unsqueeze(1) + torch.arange(k, device=tokens.device)
            tokens.scatter_(1, columns, drafts)
            lengths = lengths + k
        hypotheses = [[self._hypothesis(tokens[i], max_len)] for i in range(bsz)]
        self._record(hypotheses, sample)
        return hypotheses

    def _finished(self, tokens):
        return (tokens[:, 1:] == self.eos).any(dim=1)

    def _hypothesis(self, row, max_len):
        """The row's output up to its first EOS (or max_len), and the blocks it took."""
        body = row[1:]
        eos_at = (body == self.eos).nonzero()
        end = min(int(eos_at[0]) if len(eos_at) else max_len, max_len)
        out = torch.cat([body[:end], body.new_tensor([self.eos])])
        gains = [min(self.block_size, len(out) - self.block_size * i) for i in range(-(-len(out) // self.block_size))]
        return {"tokens": out, "score": torch.tensor(0.0), "positional_scores": torch.zeros(len(out)),
                "attention": torch.empty(0), "alignment": torch.empty(0), "steps": len(gains),
                "accepted_per_iteration": gains}

    def _record(self, hypotheses, sample):
        """Statistics as the speculative decoders keep them: tokens kept per drafted block."""
        trace = self.stats.start_batch()
        for row, hypos in enumerate(hypotheses):
            trace.gained[row] = list(hypos[0]["accepted_per_iteration"])
        self.stats.end_batch(trace, sample["id"].tolist() if "id" in sample else None)


@register_decoder("drafter-only", "the block NAT drafter alone, every drafted block accepted (no verifier)",
                  DrafterOnlyOptions, needs_drafter=True, greedy_equivalent=False)
def build_drafter_only(task, models, args, opts):
    """With ``--path drafter.pt`` the drafter is models[0]; else ``--drafter-path`` is loaded."""
    options.check_generation_args(args, "drafter-only")
    options.check_block_size(opts.block_size)
    options.refuse_beam_and_set_one(args, "drafter-only")
    drafter = models[0] if hasattr(models[0], "propose") else load_drafter(
        task, models[0], opts.drafter_path, "drafter-only", opts.block_size)
    generator = DrafterOnlyGenerator(drafter, task.target_dictionary, opts.block_size or drafter.block_size, args,
                                     options.head_candidates(opts.head_candidates, lossless=True))
    log_stats_at_exit(generator.stats, "drafter-only")
    return generator
