"""``--decoding greedy``: greedy search through the speculative core with nothing drafted.

Each iteration feeds one token per row to the verifier's lean cached decoder and appends its
choice: the same loop, cache and matrix products (``--verifier-matmul``) as every drafting
decoder, so that the latency harness can tell what drafting itself adds (a drafter's row
against this one) apart from what the lean verifier adds (this row against fairseq's own
``--beam 1``).  The output is ``--beam 1``'s.
"""
import dataclasses

from fairseq_plugins.decoding.builder import build_speculative
from fairseq_plugins.decoding.drafters import Drafter
from fairseq_plugins.decoding.options import DraftLengthOptions
from fairseq_plugins.decoding.registry import register_decoder

# --draft-length (read by every greedy-equivalent decoder; nothing to shorten here) and --verifier-matmul,
# defined once in DraftLengthOptions; no --block-size: nothing is drafted
GreedyOptions = dataclasses.make_dataclass("GreedyOptions", [
    (f.name, f.type, dataclasses.field(default=f.default, metadata=f.metadata))
    for f in dataclasses.fields(DraftLengthOptions) if f.name in ("draft_length", "verifier_matmul")])


class NoDrafts(Drafter):
    """Drafts nothing (the core never asks it at block size 0)."""

    def propose(self, tokens, lengths, k):
        return tokens[:, :0]


@register_decoder("greedy", "greedy search on the lean cached verifier (the speculative core drafting nothing: one "
                            "token per row and iteration), identical to greedy", GreedyOptions)
def build_greedy(task, models, args, opts):
    fixed = DraftLengthOptions(draft_length="fixed", verifier_matmul=opts.verifier_matmul)  # no draft to time
    generator = build_speculative(task, models, args, "greedy", NoDrafts(), fixed, block_size=1)
    # k = 0, which --block-size refuses (a user's k >= 1): each iteration verifies the pending token alone
    generator.cfg = dataclasses.replace(generator.cfg, block_size=0)
    return generator
