"""SpecDec verifying a draft tree in one verifier pass: an experimental decoder, not registered by default.

The block drafter's k drafts are its top-1 token at each position. Its 2nd and 3rd tokens are often the verifier's
choice where the top-1 is not: with an earlier demo pair, top-3 branches at every position followed by 2 tokens of
the main draft verify 4.47 tokens per iteration on test2016 against the chain's 3.58, for 61 verified positions
instead of 11.
On a CPU the wider block costs more than it gains (3.18x stock greedy against the chain's 4.11x); on a GPU at batch 1
a verifier pass is bound by kernel launches, so the wider block is nearly free.

The tree (``TreeShape``, static for a draft width k': A candidates per position at the first P positions, C
continuation tokens per branch):

    node 0          the pending token (the last accepted one, not yet fed)
    nodes 1..k'     the main draft d_1..d_k' (rank 0 at positions 1..k'), a chain
    per position i and rank a in 1..A-1: a branch node holding the drafter's rank-a token at position i, child of
                    main node i - 1, followed by a chain of up to C nodes holding d_{i+1}, d_{i+2}, ...

Every node is fed at decoding step valid + depth and attends to its row's cache and its own ancestors (the
``block_visible`` mask of ``fast_decoder.FastDecoderLayers``); the output layer then reads out only the nodes that
matter. The main draft is accepted as the core accepts a chain (greedy's choice after each node, fairseq's cumulative
score summed one step at a time, so ties break as ``--beam 1``), up to its first rejected position n; there, the
first branch off main node n whose token passes (greedy's choice at n: exactly one can), and its continuation,
accepted the same way; the verifier's choice after the last accepted node is the iteration's own token. The path's
keys/values are then moved to the slots valid .. valid + depth, and the core's rollback keeps them. The output is
greedy's by construction. With SpecDec++'s rule (top-beta, tau) a token passes when it is among its parent's
top-beta within tau; the first passing branch at n is taken.

    FAIRSEQ_PLUGINS_DECODERS=tools/draft_tree.py python -m fairseq_plugins.bench.latency ... \\
        --decoders beam1,specdec,specdec-tree
    FAIRSEQ_PLUGINS_DECODERS=tools/draft_tree.py python tools/draft_tree.py \\
        [SENTENCES_FILE] [DEVICE] [DRAFT_LENGTH] [A C P]   # outputs and tokens per iteration vs specdec's

``specdec-tree`` and ``specdec++-tree`` take the options of ``specdec`` and ``specdec++`` and the tree's shape:
``--tree-ranks`` A (3), ``--tree-continuation`` C (2), ``--tree-positions`` P (0: every position; harness rows
``specdec-tree:tree_ranks=2,tree_positions=3``). Needs the verifier's lean layers (``fast_decoder``); the ``steps``
of viz traces are not kept for it.
"""
import os
import sys
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

import torch
from torch import Tensor

from fairseq_plugins.decoding import acceptance
from fairseq_plugins.decoding.builder import build_speculative
from fairseq_plugins.decoding.core import SpeculativeGenerator
from fairseq_plugins.decoding.drafters import draft_tokens
from fairseq_plugins.decoding.incremental import VerifierCache
from fairseq_plugins.decoding.linears import float_linear
from fairseq_plugins.decoding.registry import register_decoder
from fairseq_plugins.decoding.specdec import BlockDrafter, SpecDecOptions, drafter_linear, specdec_settings
from fairseq_plugins_compat.errors import PluginError


@dataclass
class TreeOptions(SpecDecOptions):
    tree_ranks: int = field(default=3, metadata={"help": "draft tree: the drafter's top-A tokens at a position "
                                                         "(1: the plain chain)"})
    tree_continuation: int = field(default=2, metadata={"help": "draft tree: main-draft tokens after each branch"})
    tree_positions: int = field(default=0, metadata={"help": "draft tree: branches at the first P positions only "
                                                             "(0: all)"})


class TreeShape:
    """The static tree for draft width ``width`` (k'), ``ranks`` (A), ``continuation`` (C) and ``positions`` (P).

    source (m,): each node's index into the drafter's candidates flattened as (k', A) (position * A + rank; node 0,
    the pending token, has none: -1); depth (m,); visible (m, m) bool, True where column b is an
    ancestor of row j or j itself; branches (k' + 1, A - 1): the branch nodes off main node p, -1 where none;
    follow (k' + 1,): how many continuation nodes follow each branch off main node p."""

    def __init__(self, width: int, ranks: int, continuation: int, positions: int, device):
        source, parent, depth = [-1], [0], [0]
        for position in range(width):  # the main draft
            source.append(position * ranks)
            parent.append(position)
            depth.append(position + 1)
        for position in range(min(width, positions or width)):
            for rank in range(1, ranks):
                source.append(position * ranks + rank)
                parent.append(position)  # main node `position` is d_position's node (0: the pending token)
                depth.append(position + 1)
                for step in range(1, continuation + 1):
                    if position + step >= width:
                        break
                    source.append((position + step) * ranks)
                    parent.append(len(source) - 2)
                    depth.append(position + 1 + step)
        m = len(source)
        self.source = torch.tensor(source, device=device)
        self.depth = torch.tensor(depth, device=device)
        visible = torch.eye(m, dtype=torch.bool)
        for node in range(1, m):  # parents come before their children
            visible[node] |= visible[parent[node]]
        self.visible = visible.to(device)
        self.width, self.continuation = width, continuation
        # the branches off each main node p (0..width): their nodes (width + 1, A - 1), -1 where none, and how many
        # continuation nodes follow each (width + 1,); a branch's continuation nodes follow it in node order
        branches = torch.full((width + 1, max(ranks - 1, 0)), -1, dtype=torch.long)
        follow = torch.zeros(width + 1, dtype=torch.long)
        for node in range(width + 1, m):
            if source[node] % ranks:  # a branch: rank > 0
                position = source[node] // ranks
                branches[position, source[node] % ranks - 1] = node
                follow[position] = min(continuation, width - 1 - position)
        self.branches, self.follow = branches.to(device), follow.to(device)


class TreeVerifierCache(VerifierCache):
    """The verifier cache fed a whole tree per iteration (``forward_tree``), whose accepted path is then moved into
    place (``keep_path``) before the core's ``rollback`` keeps it."""

    def __init__(self, model, encoder_out: Dict, batch_size: int, device, linear=float_linear, built=None):
        super().__init__(model, encoder_out, batch_size, device, linear=linear, built=built)
        if not self.fast:
            raise PluginError("specdec-tree needs the verifier's lean layers (fast_decoder); this verifier has "
                              "layers they do not run")

    def forward_tree(self, tokens: Tensor, tree: TreeShape) -> Tensor:
        """tokens (B, m) in the tree's node order -> the last decoder states (B, m, C), as ``forward_block``'s, with
        each node at step valid + its depth and seeing only its ancestors in the block (``log_probs`` reads out the
        nodes that matter)."""
        steps = self.valid.unsqueeze(1) + tree.depth.unsqueeze(0)  # (B, m)
        return self.decoder_states(tokens, steps, block_visible=tree.visible)

    def keep_path(self, path: Tensor):
        """Move each row's path nodes (B, d): block slots valid + path[:, j] -> valid + j, in every layer."""
        source = (self.valid.unsqueeze(1) + path)[:, None, :, None]
        target = (self.valid.unsqueeze(1) + torch.arange(path.size(1), device=path.device))[:, None, :, None]
        for layer in self.layers.layers:
            for buffer in (layer.key, layer.value):
                moved = buffer.gather(2, source.expand(-1, buffer.size(1), -1, buffer.size(3)))
                buffer.scatter_(2, target.expand(-1, buffer.size(1), -1, buffer.size(3)), moved)


class TreeGenerator(SpeculativeGenerator):
    """The core's loop with a tree verified in place of the drafted chain."""

    def __init__(self, *args, ranks: int = 3, continuation: int = 2, positions: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        if self.cfg.adaptive:
            raise PluginError("specdec-tree drafts whole blocks: --draft-length fixed or measured")
        if ranks < 1 or continuation < 0 or positions < 0:
            raise PluginError("--tree-ranks >= 1, --tree-continuation >= 0, --tree-positions >= 0")
        self.ranks, self.continuation, self.positions = ranks, continuation, positions
        self.cache_factory = TreeVerifierCache
        self.trees: Dict[Tuple[int, int], TreeShape] = {}
        self._candidates: Optional[Tensor] = None  # (B, k', A) of the last draft; None: the core's chain
        self._tree: Optional[tuple] = None  # what _verify leaves _accept: (tree, tokens, states, cache, limits)

    def tree(self, width: int, ranks: int, device) -> TreeShape:
        if (width, ranks) not in self.trees:
            self.trees[width, ranks] = TreeShape(width, ranks, self.continuation, self.positions, device)
        return self.trees[width, ranks]

    def _draft(self, state, max_len, max_width=None) -> Tensor:
        """As the core's, keeping the drafter's top-A tokens at the drafted positions (B, k', A)."""
        k = self._draft_width(state, max_len, max_width)
        self._candidates = None
        if k == 0:
            return state.tokens[:, :0]
        draft = draft_tokens(self.drafter.propose(state.tokens, state.lengths, k))
        drafts = draft.tokens[:, :self._useful_width(draft.tokens)]
        if draft.scores is None:  # a drafter without scores: its draft is verified as a chain
            return drafts
        ranks = min(self.ranks, draft.scores.size(-1))
        self._candidates = draft.scores[:, :drafts.size(1)].topk(ranks, dim=-1).indices
        self._candidates[:, :, 0] = drafts
        return drafts

    def _verify(self, cache, state, drafts, limits):
        """The whole tree in one pass; returns the main draft's log-probs (B, k'+1, V), as the core's chain, and keeps
        the rest for ``_accept``."""
        if drafts.size(1) == 0 or self._candidates is None:
            self._tree = None
            return super()._verify(cache, state, drafts, limits)
        tree = self.tree(drafts.size(1), self._candidates.size(2), drafts.device)
        pending = state.tokens.gather(1, (state.lengths - 1).unsqueeze(1))
        flat = self._candidates.reshape(drafts.size(0), -1)
        tokens = torch.cat([pending, flat.index_select(1, tree.source[1:])], dim=1)  # (B, m)
        states = cache.forward_tree(tokens, tree)
        main = states[:, :tree.width + 1]
        self._tree = (tree, tokens, states, cache, limits)
        return acceptance.apply_limits(cache.log_probs(main), cache.steps(tree.width + 1), limits)

    def _accept(self, state, drafts, lprobs):
        """The main draft accepted as the core accepts a chain, up to its first rejected position n; there, the branch
        whose token passes (greedy's choice, or SpecDec++'s rule), if the tree has one, and its continuation, accepted
        the same way. Returns what the core's ``_accept`` returns, for the path taken."""
        if self._tree is None:
            return super()._accept(state, drafts, lprobs)
        tree, tokens, states, cache, limits = self._tree
        self._tree = None
        cums, choices, choice_cums = self._scores(state, drafts, lprobs)  # along the main draft
        n = acceptance.leading_true(self.accept(drafts, choices, lprobs))  # (B,) main-draft tokens accepted
        branch = self._branch(tree, tokens, states, cache, limits, n, cums, choices, lprobs)
        main_nodes = torch.arange(tree.width + 1, device=drafts.device).expand(drafts.size(0), -1)
        main = (main_nodes, tokens[:, :tree.width + 1], choices, cums, choice_cums, lprobs)
        if branch is None:
            n_accepted = n
            path, path_tokens, path_choices, path_cums, path_choice_cums, path_lprobs = main
        else:
            taken, *branch_arrays = branch
            n_accepted = n + taken  # taken: 0 without a branch, else 1 + its accepted continuation tokens
            # path position j: main node j up to n, then the branch's nodes, in [main | branch] arrays
            j = main_nodes[:1]
            index = torch.where((j > n.unsqueeze(1)) & (taken > 0).unsqueeze(1), tree.width + j - n.unsqueeze(1), j)
            path, path_tokens, path_choices, path_cums, path_choice_cums, path_lprobs = (
                along_path(index, of_main, of_branch) for of_main, of_branch in zip(main, branch_arrays))
            cache.keep_path(path)
        return self._assemble(state, path_tokens[:, 1:], n_accepted, path_cums, path_choices, path_choice_cums,
                              path_lprobs)

    def _branch(self, tree, tokens, states, cache, limits, n, cums, choices, lprobs):
        """At main position n (B,): the first branch whose token passes the rule after main node n, and its
        continuation. None when no row has one; else (taken (B,): 0, or 1 + the continuation tokens accepted;
        then, as the main draft's arrays in ``_accept``: the branch's nodes, tokens, choices after each node, cumulative
        scores and the choices' scores (B, C+1), log-probs after each node (B, C+1, V))."""
        if tree.branches.size(1) == 0:
            return None
        offered = tree.branches.index_select(0, n)  # (B, A-1) branch nodes off main node n, -1: none
        alternatives = tokens.gather(1, offered.clamp(min=0))
        after = lprobs.gather(1, n.view(-1, 1, 1).expand(-1, 1, lprobs.size(-1)))  # (B, 1, V) after main node n
        width = offered.size(1)
        passed = self.accept(alternatives, choices.gather(1, n.unsqueeze(1)).expand(-1, width + 1),
                             after.expand(-1, width + 1, -1)) & (offered >= 0)
        has = passed.any(dim=1)
        if not bool(has.any()):
            return None
        first = passed.long().argmax(dim=1, keepdim=True)  # the first passing rank
        follow = tree.follow.index_select(0, n)  # (B,)
        steps_ahead = torch.arange(tree.continuation + 1, device=n.device).unsqueeze(0)
        usable = (steps_ahead <= follow.unsqueeze(1)) & has.unsqueeze(1)  # (B, C+1)
        nodes = offered.gather(1, first).clamp(min=0) + steps_ahead.masked_fill(~usable, 0)
        b_tokens = tokens.gather(1, nodes)  # the branch token, then its continuation
        b_lprobs = acceptance.apply_limits(
            cache.log_probs(states.gather(1, nodes.unsqueeze(-1).expand(-1, -1, states.size(-1)))),
            cache.valid.unsqueeze(1) + n.unsqueeze(1) + 1 + steps_ahead, limits)
        branch_cum = cums.gather(1, n.unsqueeze(1)).squeeze(1) + after.squeeze(1).gather(1, b_tokens[:, :1]).squeeze(1)
        b_cums = acceptance.cumulative_scores(b_lprobs, b_tokens[:, 1:], branch_cum)  # (B, C+1)
        b_choices, b_choice_cums = acceptance.verifier_choices(b_lprobs, b_cums)
        followed = acceptance.leading_true(self.accept(b_tokens[:, 1:], b_choices, b_lprobs) & usable[:, 1:])
        taken = torch.where(has, 1 + followed, torch.zeros_like(followed))
        return taken, nodes, b_tokens, b_choices, b_cums, b_choice_cums, b_lprobs


def along_path(index: Tensor, of_main: Tensor, of_branch: Tensor) -> Tensor:
    """Values (B, k+1[, V]) along the path whose position j is column ``index[:, j]`` of [of_main | of_branch],
    the main draft's (B, k+1[, V]) and the branch's (B, C+1[, V])."""
    joined = torch.cat([of_main, of_branch], dim=1)
    index = index.clamp(max=joined.size(1) - 1)
    return joined.gather(1, index if joined.dim() == 2 else index.unsqueeze(-1).expand(-1, -1, joined.size(-1)))


def _build(name: str):
    return lambda task, models, args, opts: build_tree_generator(task, models, args, opts, name)


def build_tree_generator(task, models, args, opts, name: str):
    preset = name[:-len("-tree")]
    drafter, beta, tau, block_size, vocab_limit = specdec_settings(task, models, opts, name, preset)
    adapter = BlockDrafter(drafter, vocab_limit=vocab_limit, linear=drafter_linear(opts, preset, drafter))
    plain = build_speculative(task, models, args, name, adapter, opts, block_size, beta, tau)
    generator = TreeGenerator(plain.verifier, task.target_dictionary, adapter, plain.cfg, stats=plain.stats,
                              verifier_linear=plain.verifier_linear, ranks=opts.tree_ranks,
                              continuation=opts.tree_continuation, positions=opts.tree_positions)
    generator.guard = plain.guard
    return generator


if __name__.startswith("fairseq_plugins_extra_"):  # imported by the registry (FAIRSEQ_PLUGINS_DECODERS), not a test
    register_decoder("specdec-tree", "SpecDec verifying the drafter's top-A tokens as a tree (experiment)",
                     TreeOptions, needs_drafter=True)(_build("specdec-tree"))
    register_decoder("specdec++-tree", "SpecDec++ (top-beta, tau) over the drafter's top-A tokens as a tree "
                     "(experiment)", TreeOptions, needs_drafter=True, greedy_equivalent=False)(_build("specdec++-tree"))


def main(argv):
    """Translate SENTENCES_FILE (default: the demo's sentences.en) with the demo pair's ``specdec`` and
    ``specdec-tree``: the outputs must be equal; prints both decoders' tokens per iteration."""
    from fairseq_plugins.api import Translator

    demo = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "checkpoints", "demo")
    path = argv[0] if argv else os.path.join(demo, "sentences.en")
    device = argv[1] if len(argv) > 1 else "cpu"
    draft_length = argv[2] if len(argv) > 2 else "fixed"
    shape = dict(zip(("tree_ranks", "tree_continuation", "tree_positions"), (int(a) for a in argv[3:6])))
    with open(path) as f:
        sentences = [line.strip() for line in f if line.strip()]
    outputs, per_iteration = {}, {}
    for decoding in ("specdec", "specdec-tree"):
        extra = shape if decoding == "specdec-tree" else {}
        translator = Translator.load(os.path.join(demo, "verifier.pt"), demo, drafter=os.path.join(demo, "drafter.pt"),
                                     decoding=decoding, source_lang="en", target_lang="de", device=device,
                                     sentencepiece_model=os.path.join(demo, "sentencepiece.model"),
                                     max_len_a=1.2, max_len_b=10, draft_length=draft_length, **extra)
        outputs[decoding] = translator.translate(sentences)
        summary = translator.generator.stats.summary()
        per_iteration[decoding] = (f"{summary['mean_accepted_per_iteration']:.2f} tokens per iteration, "
                                   f"{summary['mean_iterations']:.2f} iterations per sentence")
    count = len(sentences)
    same = sum(a == b for a, b in zip(outputs["specdec"], outputs["specdec-tree"]))
    print(f"{count} sentences on {device}, --draft-length {draft_length}, tree {shape or 'default'}: "
          f"outputs equal {same}/{count}")
    for name, summary in per_iteration.items():
        print(f"  {name}: {summary}")
    return 0 if same == count else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
