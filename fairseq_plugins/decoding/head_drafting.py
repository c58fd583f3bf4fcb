"""Drafting a block through a block drafter's sequential head (``models.sequential_head``) without a per-token loop
of tensor operations.

The head's input at j is t_{j-1}, the token drafted at j - 1: t_j is chosen among the ``n_candidates`` best tokens of
the block's own logits at j, and since t_{j-1} is one of the candidates at j - 1, the scores of every (candidate at
j - 1, candidate at j) pair are computed for all positions in one batch of products; the sequential choice is then a
walk through a small table (on the host, or as k gathers on the device).
"""
import torch
from torch import Tensor, nn

from fairseq_plugins.decoding.linears import float_linear
from fairseq_plugins_compat.errors import PluginError


def head_problems(decoder) -> str:
    """Why :class:`HeadDrafting` cannot run this drafter decoder's head ('' if it can)."""
    projection = getattr(decoder, "output_projection", None)
    if getattr(decoder, "adaptive_softmax", None) is not None or type(projection) is not nn.Linear \
            or projection.bias is not None:
        return "the drafter's output layer is not one linear map without bias"
    return ""


class HeadDrafting:
    """Drafts a block through a decoder's ``sequential_head`` among the block's best candidates.

    The head's products are folded into tables once (the drafter is frozen at inference): with O the output layer's
    rows (the first ``vocab_limit``), the corrected logits are ``O x_j + (O W2) h + O b2``, where ``O x_j`` are the
    block's own logits and h = relu(W1x x_j + (E W1e^T + b1)[t_{j-1}]).  The tables carry one more column, a
    constant 1 in h's input (which relu keeps) facing O b2, so that one product adds the bias too.

    Args:
        decoder: a ``BlockDrafterDecoder`` with a ``sequential_head``
        vocab_limit: > 0: the drafter proposes among the first ``vocab_limit`` entries (its logits' width)
        n_candidates: m, the block's best tokens at each position the head chooses among
        linear: how the product of the states runs an ``nn.Linear`` (the drafter cache's ``linear``; None: as
            loaded)
    """

    def __init__(self, decoder, vocab_limit: int, n_candidates: int, linear=None):
        problems = head_problems(decoder)
        if problems:
            raise PluginError(f"the drafter's sequential head cannot run: {problems}")
        if n_candidates < 1:
            raise PluginError(f"--head-candidates must be >= 1 (0 turns the head off), got {n_candidates}")
        head = decoder.sequential_head
        with torch.no_grad():
            inner = head.inner.weight.float()  # (C, C + D)
            state_dim = inner.size(0)
            rows = decoder.output_projection.weight.float()
            rows = rows[:vocab_limit] if vocab_limit else rows  # (V, C)
            token_inner = decoder.embed_tokens.weight.float() @ inner[:, state_dim:].t() + head.inner.bias.float()
            ones = token_inner.new_ones(token_inner.size(0), 1)
            self.token_inner = torch.cat([token_inner, ones], dim=1)  # (V_all, C + 1)
            self.state_inner = nn.Linear(state_dim, state_dim + 1, bias=False, device=inner.device)  # [W1x; 0]
            self.state_inner.weight.copy_(torch.cat([inner[:, :state_dim], inner.new_zeros(1, state_dim)]))
            # (V, C + 1): [O W2, O b2]
            self.token_outer = torch.cat([rows @ head.outer.weight.float(), (rows @ head.outer.bias.float())[:, None]],
                                         dim=1)
        self.state_product = (linear or float_linear)(self.state_inner.requires_grad_(False))
        self.n_candidates = n_candidates
        self.n_allowed = rows.size(0) - sum(1 for b in decoder.banned if b < rows.size(0))

    def draft(self, states: Tensor, logits: Tensor, last: Tensor) -> Tensor:
        """Drafted tokens (B, k), the walk on the host.

        states (B, k, C): the block's query states before the output layer; logits (B, k, V): the block's logits
        (banned tokens at -inf); last (B,): each row's last accepted token.
        """
        candidates, next_choice = self.choices(states, logits, last)
        return walk(next_choice, candidates)

    def draft_on_device(self, states: Tensor, logits: Tensor, last: Tensor) -> Tensor:
        """:meth:`draft`, the walk as k gathers on the tensors' device (no host synchronisation: it can be part of a
        CUDA graph)."""
        candidates, next_choice = self.choices(states, logits, last)
        chosen = walk_on_device(next_choice)
        return candidates.gather(-1, chosen[:, :, None]).squeeze(-1)

    def choices(self, states: Tensor, logits: Tensor, last: Tensor):
        """The candidates (B, k, m) and, at each position j, the best candidate after each candidate p at j - 1
        (B, k, m) (for j = 0 all entries are the choice after ``last``)."""
        candidates, scores = self.pair_scores(states, logits, last)
        return candidates, scores.argmax(-1).view(candidates.shape)

    def pair_scores(self, states: Tensor, logits: Tensor, last: Tensor):
        """The candidates (B, k, m) and the head's corrected logit of every (candidate p at j - 1, candidate q at j)
        pair, (B * k, m, m) indexed [b * k + j, p, q] (for j = 0 every p stands for ``last``)."""
        batch, k, state_dim = states.shape
        m = min(self.n_candidates, self.n_allowed)
        best_logits, candidates = logits.float().topk(m, dim=-1)  # (B, k, m)
        previous = torch.cat([last[:, None, None].expand(-1, 1, m), candidates[:, :-1]], dim=1)  # (B, k, m)
        # hidden[b * k + j, p]: h at position j after candidate p at j - 1 (after ``last`` for j = 0), with its 1
        hidden = self.token_inner.index_select(0, previous.reshape(-1)).view(batch * k, m, -1)
        hidden += self.state_product(states.reshape(batch * k, state_dim).float())[:, None, :]
        outer = self.token_outer.index_select(0, candidates.reshape(-1)).view(batch * k, m, -1)
        scores = torch.bmm(hidden.relu_(), outer.transpose(1, 2))  # [b * k + j, p, q]: candidate q after p
        scores += best_logits.reshape(batch * k, 1, m)
        return candidates, scores


def walk(next_choice: Tensor, candidates: Tensor) -> Tensor:
    """next_choice (B, k, m): at position j, the best candidate after candidate p at j - 1 (for j = 0, p = 0);
    candidates (B, k, m) -> the chosen candidates (B, k), following the choices from position 0 (on the host: k
    small steps each are cheaper as list lookups than as tensor operations)."""
    drafts = []
    for row_choices, row_candidates in zip(next_choice.tolist(), candidates.tolist()):
        p, path = 0, []
        for choices, tokens in zip(row_choices, row_candidates):
            p = choices[p]
            path.append(tokens[p])
        drafts.append(path)
    return torch.tensor(drafts, dtype=torch.long, device=candidates.device)


def walk_on_device(next_choice: Tensor) -> Tensor:
    """:func:`walk` with tensor operations on ``next_choice``'s device: (B, k, m) -> (B, k)."""
    chosen = next_choice.new_zeros(next_choice.size(0), 1)
    path = []
    for j in range(next_choice.size(1)):
        chosen = next_choice[:, j].gather(1, chosen)
        path.append(chosen)
    return torch.cat(path, dim=1)
