"""``--decoding greedy``: greedy search through the speculative core with nothing drafted.

Each iteration feeds one token per row to the verifier's lean cached decoder and appends its
choice: the same loop, cache and matrix products (``--verifier-matmul``) as every drafting
decoder, so that the latency harness can tell what drafting itself adds (a drafter's row
against this one) apart from what the lean verifier adds (this row against fairseq's own
``--beam 1``).  The output is ``--beam 1``'s.  At batch 1 on CUDA (``--cuda-graphs``) each
one-token step replays one CUDA graph (``cuda_graphs.StaticVerifier``), as SpecDec's verifier blocks do.
"""
import dataclasses

from fairseq_plugins.decoding import cuda_graphs
from fairseq_plugins.decoding.builder import build_speculative
from fairseq_plugins.decoding.drafters import Drafter
from fairseq_plugins.decoding.options import DraftLengthOptions
from fairseq_plugins.decoding.registry import register_decoder
from fairseq_plugins.decoding.specdec import SpecDecOptions

# --draft-length (read by every greedy-equivalent decoder; nothing to shorten here), --verifier-matmul and
# --cuda-graphs, each defined once elsewhere; no --block-size: nothing is drafted
_SHARED = {f.name: f for f in dataclasses.fields(SpecDecOptions)}
GreedyOptions = dataclasses.make_dataclass("GreedyOptions", [
    (name, _SHARED[name].type, dataclasses.field(default=_SHARED[name].default, metadata=_SHARED[name].metadata))
    for name in ("draft_length", "verifier_matmul", "cuda_graphs")])


class NoDrafts(Drafter):
    """Drafts nothing (the core never asks it at block size 0)."""

    def propose(self, tokens, lengths, k):
        return tokens[:, :0]


@register_decoder("greedy", "greedy search (the output of --beam 1) on the plugin's lean cached verifier: no "
                            "drafter, one token per row and iteration", GreedyOptions)
def build_greedy(task, models, args, opts):
    fixed = DraftLengthOptions(draft_length="fixed", verifier_matmul=opts.verifier_matmul)  # no draft to time
    # k = 0: each iteration verifies the pending token alone
    generator = build_speculative(task, models, args, "greedy", NoDrafts(), fixed, block_size=0)
    if cuda_graphs.wanted(str(opts.cuda_graphs), None, models[0]):
        generator.cache_factory = cuda_graphs.GraphedVerifierCaches(1, generator.max_len)
    return generator

