"""The one speculative decoding loop shared by SpecDec, SpecDec++, IAD and the Jacobi family.

    encode once -> draft up to k tokens per row -> verify the last accepted token + the
    draft in ONE verifier pass (KV cache) -> accept up to the bifurcation (+ the verifier's
    own token) -> roll the cache back to the accepted length -> retire finished rows -> repeat

The drafter is the only difference between the algorithms (see ``drafters``); with the
greedy acceptance rule the output is token for token fairseq's ``--beam 1`` output.
"""
import contextlib
import logging
from dataclasses import dataclass
from typing import List, Optional

import torch
from torch import Tensor

from fairseq_plugins.decoding import acceptance, draft_length
from fairseq_plugins.decoding.drafters import BatchStart, Iteration, draft_tokens
from fairseq_plugins.decoding.built_once import BuiltOnce
from fairseq_plugins.decoding.fast_encoder import encoder_function
from fairseq_plugins.decoding.incremental import VerifierCache
from fairseq_plugins.decoding.linears import float_linear
from fairseq_plugins.decoding.stats import DecodingStats
from fairseq_plugins_compat.errors import PluginError

logger = logging.getLogger(__name__)


class NoProfile:
    """The profiler interface (``bench.profile``), doing nothing: ``section(name)`` wraps
    the "encoder", "drafter", "verifier" and "accept" parts; ``tick()`` counts iterations."""

    _nothing = contextlib.nullcontext()

    def section(self, name: str):
        return self._nothing

    def tick(self):
        pass


@dataclass
class SpeculativeConfig:
    """Decoding options; the length options mean what they mean to fairseq-generate."""

    block_size: int  # k: tokens drafted per iteration (the most, when adaptive)
    adaptive: bool = False  # per-row draft length (see draft_length)
    measured: bool = False  # draft only while measured to pay (draft_length.DraftGuard)
    beta: int = 1  # SpecDec++ top-beta (1 with tau 0: vanilla, lossless)
    tau: float = 0.0  # SpecDec++ log-probability tolerance
    max_len_a: float = 0.0
    max_len_b: int = 200
    min_len: int = 1
    unk_penalty: float = 0.0
    len_penalty: float = 1.0
    normalize_scores: bool = True

    @property
    def lossless(self) -> bool:
        return acceptance.is_lossless(self.beta, self.tau)


@dataclass
class BatchState:
    """Per-row decoding state of the rows still active.

    tokens: (B, max_len + k + 3) accepted tokens, column 0 is EOS (the decoder's BOS), pad after.
    lengths: (B,) filled columns of ``tokens``; the last one is not yet fed to the verifier.
    cum: (B, max_len + k + 3) fairseq's cumulative score at each filled column (0 at column 0).
    rows: (B,) index of each active row in the original batch.
    k: (B,) draft length of each row (constant unless adaptive).
    """

    tokens: Tensor
    lengths: Tensor
    cum: Tensor
    rows: Tensor
    k: Tensor

    def keep(self, keep_idx: Tensor):
        self.tokens, self.lengths = self.tokens[keep_idx], self.lengths[keep_idx]
        self.cum, self.rows, self.k = self.cum[keep_idx], self.rows[keep_idx], self.k[keep_idx]


class SpeculativeGenerator:
    """fairseq generator interface: ``generate(models, sample) -> List[List[hypothesis]]``.

    ``repack``: pack the verifier's weights afresh on every ``generate`` (``--eval-bleu``'s
    generator, whose verifier is trained between calls: an optimizer changes the weights
    through ``.data``, which the version stamp of ``PackedLinears`` and ``HalfWeightLinears`` does not see).
    The verifier's lean layers and fast encoder are built on the first batch and reused (``built``)."""

    def __init__(self, verifier, tgt_dict, drafter, cfg: SpeculativeConfig, stats: DecodingStats = None,
                 verifier_linear=float_linear, name: str = "speculative decoding"):
        self.name = name  # the --decoding name, for the log
        self.warned_batches = False  # the cost of a relaxed rule's batches was logged
        self.verifier = verifier
        self.verifier_linear = verifier_linear  # how the verifier cache runs an nn.Linear (``linears``)
        verifier.eval()
        self.drafter = drafter
        self.cfg = cfg
        self.pad, self.eos, self.unk = tgt_dict.pad(), tgt_dict.eos(), tgt_dict.unk()
        self.max_positions = verifier.max_decoder_positions()
        self.stats = stats or DecodingStats()
        self.accept = acceptance.choose_rule(cfg.beta, cfg.tau)
        self.profiler = NoProfile()
        self.guard = draft_length.DraftGuard(skip_catch_up=drafter.has_prefix_cache) if cfg.measured else None
        self.repack = False
        self.built = BuiltOnce()
        self.cache_factory = VerifierCache  # (verifier, encoder_out, B, device, linear=, built=) -> its cache

    def max_len(self, source_len: int) -> int:
        """The most tokens (without EOS) a row with a source of ``source_len`` tokens (padded) may get."""
        return min(int(self.cfg.max_len_a * source_len + self.cfg.max_len_b), self.max_positions - 1)

    def limits(self, src_tokens: Tensor) -> acceptance.GenerationLimits:
        max_len = self.max_len(src_tokens.size(1))
        if self.cfg.min_len > max_len:
            raise PluginError(f"--min-len {self.cfg.min_len} is larger than the maximum output length {max_len}")
        return acceptance.GenerationLimits(
            pad=self.pad, unk=self.unk, eos=self.eos, min_len=self.cfg.min_len,
            max_len=max_len, unk_penalty=self.cfg.unk_penalty,
        )

    def generate(self, models, sample, **kwargs) -> List[List[dict]]:
        """fairseq's generator interface: one list of hypotheses (here: one) per sentence.

        Decodes in ``torch.inference_mode`` (~10 % faster than ``no_grad`` on a CPU at batch
        1: less bookkeeping per tensor operation); the hypotheses' tensors are returned as
        ordinary tensors, which callers may modify in place (fairseq-generate does)."""
        with torch.inference_mode():
            finished = self._generate(sample)
        return [[{name: value.clone() if torch.is_tensor(value) else value for name, value in hypo.items()}
                 for hypo in hypos] for hypos in finished]

    def _generate(self, sample) -> List[List[dict]]:
        net_input = sample["net_input"]
        src_tokens, src_lengths = net_input["src_tokens"], net_input["src_lengths"]
        limits = self.limits(src_tokens)
        bsz, section = src_tokens.size(0), self.profiler.section
        self._warn_relaxed_batches(bsz, src_tokens.device)
        if self.repack:
            self.built.clear()
            if hasattr(self.verifier_linear, "forget"):
                self.verifier_linear.forget()
        with section("encoder"):  # 1. encode once
            encode = encoder_function(self.verifier.encoder, self.verifier_linear, self.built)  # packed: fast_encoder's
            encoder_out = encode(src_tokens, src_lengths=src_lengths)
            cache = self.cache_factory(self.verifier, encoder_out, bsz, src_tokens.device,
                                       linear=self.verifier_linear, built=self.built)
            self.drafter.start(BatchStart(src_tokens, src_lengths, limits.max_len, encoder_out))
        state = self._initial_state(src_tokens, limits.max_len)
        finished: List[List[dict]] = [[] for _ in range(bsz)]
        trace = self.stats.start_batch()
        while state.rows.numel() > 0:
            self.profiler.tick()
            drafting = self.guard.start_iteration(state.rows.numel()) if self.guard is not None else True
            self.stats.count_iteration(drafted=drafting)
            with section("drafter"):  # 2. draft at most up to max_len
                width = self.guard.max_width if self.guard is not None else None  # a trial of drafting: its limit
                drafts = self._draft(state, limits.max_len, width) if drafting else state.tokens[:, :0]
            with section("verifier"):  # 3. verify the pending token + the draft in one pass
                lprobs = self._verify(cache, state, drafts, limits)
            with section("accept"):  # 4. accept up to the bifurcation, plus the verifier's own token there
                step, new_cum, done = self._accept(state, drafts, lprobs)
                trace.record(state.rows, drafts, step.choices, step.n_new, lprobs)
                self._append(state, step.new_tokens, new_cum, step.n_new)  # 5. append; roll the verifier cache back to what was accepted
                cache.rollback(step.n_new)
            with section("drafter"):
                self.drafter.update(step)
            with section("accept"):  # 6. retire finished rows
                if bool(done.any()):
                    self._retire(state, done, finished, trace, cache)
            if self.guard is not None:
                self.guard.end_iteration(int(step.n_new.sum()))
        self.stats.end_batch(trace, sample["id"].tolist() if "id" in sample else None)
        return finished

    def _warn_relaxed_batches(self, bsz: int, device):
        """Once: a relaxed acceptance rule (SpecDec++'s) at several sentences a batch on a CPU, which drafts and
        verifies a whole block for every row in every iteration (its output depends on the drafts, so
        ``--draft-length measured`` never skips drafting): on the demo pair at batch 32, 0.42-0.47x ``greedy``."""
        if self.warned_batches or self.cfg.lossless or bsz == 1 or device.type != "cpu":
            return
        self.warned_batches = True
        logger.warning(f"{self.name}: {bsz} sentences a batch on a CPU: with --beta/--tau every iteration drafts and "
                       "verifies a whole block for every row (~0.45x greedy at batch 32 on the demo pair); "
                       "--batch-size 1, or the lossless --decoding specdec, is the fast choice")

    def _initial_state(self, src_tokens, max_len) -> BatchState:
        bsz, device = src_tokens.size(0), src_tokens.device
        width = max_len + self.cfg.block_size + 3  # room for a whole block past max_len
        tokens = src_tokens.new_full((bsz, width), self.pad)
        tokens[:, 0] = self.eos
        return BatchState(tokens=tokens, lengths=src_tokens.new_ones(bsz),
                          cum=torch.zeros(bsz, width, device=device),
                          rows=torch.arange(bsz, device=device),
                          k=draft_length.initial_lengths(bsz, self.cfg.block_size, device))

    def _draft(self, state, max_len, max_width: Optional[int] = None) -> Tensor:
        """(B, k') drafts, k' at most ``_draft_width`` (cut to ``_useful_width`` unless the drafter's every column is
        verified); past its own length a row's drafts are pad (the verifier will not accept them)."""
        k = self._draft_width(state, max_len, max_width)
        if k == 0:
            return state.tokens[:, :0]
        drafts = draft_tokens(self.drafter.propose(state.tokens, state.lengths, k)).tokens
        if self.cfg.adaptive:
            beyond = torch.arange(drafts.size(1), device=drafts.device).unsqueeze(0) >= state.k.unsqueeze(1)
            drafts = drafts.masked_fill(beyond, self.pad)
        if self.drafter.verify_every_column:
            return drafts
        return drafts[:, :self._useful_width(drafts)]

    @staticmethod
    def _draft_width(state, max_len, max_width: Optional[int]) -> int:
        """Tokens to draft a row: the longest draft length of the rows, at most the room left before max_len and
        ``max_width`` (the guard's, in a trial of drafting; None: no limit)."""
        return max(0, min(int(state.k.max()), max_len - int(state.lengths.max()) + 1, max_width or max_len))

    def _useful_width(self, drafts: Tensor) -> int:
        """Columns of drafts (B, k') worth verifying: in each row, the drafts before its first
        pad, up to and including its first EOS; the verifier can accept nothing after them
        (pad is never chosen; tokens after an EOS are cut).  A scan of the rows on the host
        (one transfer instead of ~12 small tensor operations)."""
        pad, eos = self.pad, self.eos

        def useful(row: List[int]) -> int:
            for j, token in enumerate(row):
                if token == pad:
                    return j
                if token == eos:
                    return j + 1
            return len(row)

        return max(map(useful, drafts.tolist()), default=0)

    def _verify(self, cache, state, drafts, limits):
        """Run the verifier over [pending token, d_1..d_k]: its log-probs (B, k+1, V) within fairseq's limits."""
        pending = state.tokens.gather(1, (state.lengths - 1).unsqueeze(1))
        block = torch.cat([pending, drafts], dim=1)
        steps = cache.steps(block.size(1))
        lowest, highest = cache.step_bounds(block.size(1))
        lprobs, _states = cache.forward_block(block)
        return acceptance.apply_limits(lprobs, steps, limits, lowest, highest)

    def _accept(self, state, drafts, lprobs):
        """The iteration record (new tokens (B, k+1), how many are new (B,), cut after the
        first EOS, the verifier's choices...), the new tokens' cumulative scores (B, k+1)
        and which rows are finished (B,)."""
        if drafts.size(1) == 0:
            return self._accept_verifier_token(state, drafts, lprobs)
        cums, choices, choice_cums = self._scores(state, drafts, lprobs)
        n_accepted = acceptance.leading_true(self.accept(drafts, choices, lprobs))  # (B,)
        if self.cfg.adaptive:
            offered = drafts.ne(self.pad).sum(1)
            state.k = draft_length.next_lengths(state.k, offered, n_accepted, self.cfg.block_size)
        return self._assemble(state, drafts, n_accepted, cums, choices, choice_cums, lprobs)

    def _accept_verifier_token(self, state, drafts, lprobs):
        """``_accept`` of an iteration that drafted nothing (drafts (B, 0)): every row takes the verifier's greedy
        token, (B, 1), and is finished if that is EOS. What the general path computes, in a few tensor operations
        instead of ~30 (on a CPU at batch 1 those cost ~10 % of a greedy step)."""
        current = state.cum.gather(1, (state.lengths - 1).unsqueeze(1))  # (B, 1)
        choices, choice_cums = acceptance.verifier_choices(lprobs, current)  # (B, 1) each
        step = Iteration(lengths=state.lengths, drafts=drafts, choices=choices, new_tokens=choices,
                         n_new=torch.ones_like(state.lengths), lprobs=lprobs)
        return step, choice_cums, choices[:, 0] == self.eos

    def _scores(self, state, drafts, lprobs):
        """fairseq's cumulative scores along the drafts (B, k+1), the verifier's choice after each
        prefix (B, k+1) and the choices' cumulative scores (B, k+1)."""
        current = state.cum.gather(1, (state.lengths - 1).unsqueeze(1)).squeeze(1)
        cums = acceptance.cumulative_scores(lprobs, drafts, current)
        choices, choice_cums = acceptance.verifier_choices(lprobs, cums)
        return cums, choices, choice_cums

    def _assemble(self, state, drafts, n_accepted, cums, choices, choice_cums, lprobs):
        """``_accept``'s result for a path of ``drafts`` (B, k) of which each row accepted the first
        ``n_accepted`` (B,), then takes the verifier's choice; the other arrays as ``_scores``'s,
        along the path, with its log-probs (B, k+1, V)."""
        at = n_accepted.unsqueeze(1)
        new_tokens = torch.cat([drafts, drafts.new_full((drafts.size(0), 1), self.pad)], dim=1)
        new_tokens.scatter_(1, at, choices.gather(1, at))
        new_cum = torch.cat([cums[:, 1:], cums[:, :1]], dim=1)
        new_cum.scatter_(1, at, choice_cums.gather(1, at))
        n_new, done = self._cut_at_eos(new_tokens, n_accepted + 1)
        step = Iteration(lengths=state.lengths, drafts=drafts, choices=choices, new_tokens=new_tokens, n_new=n_new,
                         lprobs=lprobs)
        return step, new_cum, done

    def _cut_at_eos(self, new_tokens, n_new):
        offsets = torch.arange(new_tokens.size(1), device=new_tokens.device).unsqueeze(0)
        is_eos = (new_tokens == self.eos) & (offsets < n_new.unsqueeze(1))
        beyond = offsets.new_full(offsets.shape, new_tokens.size(1))
        first_eos = torch.where(is_eos, offsets, beyond).min(dim=1).values
        return torch.minimum(n_new, first_eos + 1), is_eos.any(dim=1)

    def _append(self, state, new_tokens, new_cum, n_new):
        """Write the first ``n_new[i]`` new tokens and scores of each row after its prefix."""
        if new_tokens.size(1) == 1:  # nothing drafted: every row's one token (n_new is all ones)
            columns = state.lengths.unsqueeze(1)
            state.tokens.scatter_(1, columns, new_tokens)
            state.cum.scatter_(1, columns, new_cum)
            state.lengths = state.lengths + n_new
            return
        offsets = torch.arange(new_tokens.size(1), device=new_tokens.device).unsqueeze(0)
        valid = offsets < n_new.unsqueeze(1)
        columns = state.lengths.unsqueeze(1) + offsets
        state.tokens.scatter_(1, columns, torch.where(valid, new_tokens, state.tokens.gather(1, columns)))
        state.cum.scatter_(1, columns, torch.where(valid, new_cum, state.cum.gather(1, columns)))
        state.lengths = state.lengths + n_new  # a new tensor: the drafter's record keeps the old one

    def _retire(self, state, done, finished, trace, cache):
        self._finalize(state, done, finished, trace)
        keep_idx = (~done).nonzero().squeeze(1)
        if keep_idx.numel() == 0:  # the batch is done: the caches are not cut down to nothing
            state.rows = keep_idx
            return
        state.keep(keep_idx)
        cache.keep_rows(keep_idx)
        self.drafter.keep_rows(keep_idx)

    def _finalize(self, state, done, finished, trace):
        for i in done.nonzero().squeeze(1).tolist():
            length = int(state.lengths[i])
            cum = state.cum[i, 1:length]
            positional = torch.cat([cum[:1], cum[1:] - cum[:-1]])
            score = cum[-1] / (length - 1) ** self.cfg.len_penalty if self.cfg.normalize_scores else cum[-1]
            row = int(state.rows[i])
            finished[row] = [{
                "tokens": state.tokens[i, 1:length].clone(),
                "score": score,
                "attention": torch.empty(0),
                "alignment": torch.empty(0),
                "positional_scores": positional,
                **trace.row_summary(row),
            }]
