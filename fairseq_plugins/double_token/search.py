"""Pair-wise search for double-token decoding: greedy, and the paper's Algorithm 1 beam search.

Both work on a *stepper* (two methods), so they run on a fairseq model or on a scripted
decoder in tests:

- ``stepper.step(tokens)``: tokens ``(N, T)`` (start unit + generated pairs) ->
  log-probs ``(N, 2, V)`` of the next pair (left, right);
- ``stepper.reorder(rows)``: rows ``(N',)``: new row ``i`` continues old row ``rows[i]``.

A pair containing EOD ends a hypothesis (paper: FINALIZE). Hypothesis scores are the sum of
the token log-probs divided by ``len ** lenpen``, ``len`` counting every generated token
(EODs included); the search ranks candidates by the unnormalized sums, as fairseq does.
"""
from dataclasses import dataclass
from typing import List

import torch

NEG_INF = float("-inf")


@dataclass
class SearchConfig:
    eod: int  # end-of-decoding token id
    max_steps: int  # pairs per hypothesis at most; the last step may only emit (EOD, EOD)
    banned: tuple = ()  # token ids never generated (pad, bos)
    beam: int = 1  # W
    nbest: int = 1  # hypotheses returned per sentence
    stop_after: int = 0  # K: Algorithm 1 stops once K hypotheses are finished (0: K = nbest)
    lenpen: float = 1.0

    @property
    def finished_wanted(self) -> int:
        """K, never fewer than the hypotheses returned."""
        return max(self.stop_after, self.nbest)


@dataclass
class Finished:
    tokens: List[int]  # decoding order after the start unit, ending with the EOD pair
    scores: List[float]  # log-prob of each token in ``tokens``
    score: float  # sum(scores) / len(tokens) ** lenpen
    steps: int  # decoder steps (pairs) used


def _finished(tokens, scores, lenpen, steps):
    tokens, scores = list(tokens), list(scores)
    return Finished(tokens, scores, sum(scores) / len(tokens) ** lenpen, steps)


def mask_scores(lprobs, cfg, last_step):
    """lprobs ``(..., V)``: banned tokens get -inf; on the last step only EOD stays finite."""
    if last_step:
        eod = lprobs[..., cfg.eod].clone()
        lprobs = torch.full_like(lprobs, NEG_INF)
        lprobs[..., cfg.eod] = eod
        return lprobs
    lprobs = lprobs.clone()
    lprobs[..., list(cfg.banned)] = NEG_INF
    return lprobs


def double_topk(lprobs, beam_scores, n):
    """DOUBLETOPK: the ``n`` best (beam, left, right) continuations, best first.

    lprobs ``(B, W, 2, V)``, beam_scores ``(B, W)``. A pair scores
    ``beam_score + lp_left + lp_right`` (the paper's independence assumption). Each of the
    ``n`` best pairs uses one of its beam's ``n`` best left and ``n`` best right tokens, so
    combining those per beam is exact (the paper prunes lefts to ``2W`` first).

    Returns ``(scores, beam, left, right, left_lp, right_lp)``, each ``(B, n)``.
    """
    bsz, width, _, vocab = lprobs.shape
    k = min(n, vocab)
    left_lp, left = lprobs[:, :, 0].topk(k, dim=-1)  # (B, W, k)
    right_lp, right = lprobs[:, :, 1].topk(k, dim=-1)
    pair = beam_scores[:, :, None, None] + left_lp[:, :, :, None] + right_lp[:, :, None, :]
    scores, flat = pair.view(bsz, -1).topk(min(n, width * k * k), dim=-1)
    beam, li, ri = flat // (k * k), flat // k % k, flat % k

    def take(values, index):
        return values.reshape(bsz, width * k).gather(1, beam * k + index)

    return scores, beam, take(left, li), take(right, ri), take(left_lp, li), take(right_lp, ri)


def select_unfinished(scores, has_eod, width):
    """Algorithm 1 lines 13-20: the first ``width`` candidates without EOD, in rank order.

    scores, has_eod ``(B, n)``. Returns ``(index, alive)``, ``(B, width)``: candidate indices
    and whether the slot holds a real hypothesis (fewer than ``width`` may qualify).
    """
    keep = ~has_eod & torch.isfinite(scores)
    rank = torch.arange(scores.size(1), device=scores.device).expand_as(scores)
    index = torch.where(keep, rank, rank + scores.size(1)).argsort(dim=1)[:, :width]
    return index, keep.gather(1, index)


def greedy_search(stepper, start, bsz, cfg):
    """Argmax left and right token each step; a row stops at its first pair with EOD.

    start: LongTensor ``(s,)``, the start unit. Returns ``bsz`` lists of one :class:`Finished`.
    """
    active = list(range(bsz))
    tokens = start.unsqueeze(0).repeat(bsz, 1)  # (N, s + 2t)
    token_lp = torch.zeros(bsz, 0, dtype=torch.float64)  # (N, 2t)
    results = [[] for _ in range(bsz)]
    for step in range(1, cfg.max_steps + 1):
        # 1. next-pair distributions, 2. argmax per side, 3. retire rows that emitted EOD
        lprobs = mask_scores(stepper.step(tokens), cfg, step == cfg.max_steps)
        best_lp, best = lprobs.max(dim=-1)  # (N, 2)
        tokens = torch.cat([tokens, best], dim=1)
        token_lp = torch.cat([token_lp, best_lp.double().cpu()], dim=1)
        done = best.eq(cfg.eod).any(dim=1).tolist()
        for row in (r for r, d in enumerate(done) if d):
            generated = tokens[row, start.numel():].tolist()
            results[active[row]].append(_finished(generated, token_lp[row].tolist(), cfg.lenpen, step))
        keep = [r for r, d in enumerate(done) if not d]
        if not keep:
            break
        if len(keep) < len(done):
            rows = torch.tensor(keep, device=tokens.device)
            stepper.reorder(rows)
            active, tokens, token_lp = [active[r] for r in keep], tokens[rows], token_lp[rows.cpu()]
    return results


@dataclass
class _Beam:
    """Search state of the active sentences: ``N = len(active) * W`` rows."""

    active: List[int]  # sentence ids
    tokens: torch.Tensor  # (N, s + 2t) start unit + generated pairs
    token_lp: torch.Tensor  # (N, 2t) log-prob of each generated token (CPU, float64)
    scores: torch.Tensor  # (len(active), W) cumulative log-probs; -inf: empty slot


def _finalize(beam, cand, step, start_len, cfg, results):
    """Algorithm 1 lines 8-12: candidates ranked in the top W that contain EOD finish."""
    scores, parent, left, right, left_lp, right_lp = cand
    width = cfg.beam
    has_eod = left.eq(cfg.eod) | right.eq(cfg.eod)
    finish = has_eod[:, :width] & torch.isfinite(scores[:, :width])
    for s, i in finish.nonzero().tolist():
        row = parent[s, i].item()
        tokens = beam.tokens[row, start_len:].tolist() + [left[s, i].item(), right[s, i].item()]
        lps = beam.token_lp[row].tolist() + [left_lp[s, i].item(), right_lp[s, i].item()]
        results[beam.active[s]].append(_finished(tokens, lps, cfg.lenpen, step))
    return has_eod


def _expand(beam, cand, has_eod, width):
    """Algorithm 1 lines 13-20 (EXPANDBEAM). Returns the new beam and its parent rows ``(B, W)``."""
    scores, parent, left, right, left_lp, right_lp = cand
    index, alive = select_unfinished(scores, has_eod, width)
    rows = parent.gather(1, index)
    pairs = torch.stack([left.gather(1, index), right.gather(1, index)], dim=-1).view(-1, 2)
    pair_lp = torch.stack([left_lp.gather(1, index), right_lp.gather(1, index)], dim=-1).view(-1, 2)
    flat = rows.view(-1)
    new = _Beam(
        beam.active,
        torch.cat([beam.tokens[flat], pairs], dim=1),
        torch.cat([beam.token_lp[flat.cpu()], pair_lp.double().cpu()], dim=1),
        scores.gather(1, index).masked_fill(~alive, NEG_INF),
    )
    return new, rows


def _retire(beam, rows, results, cfg, stepper):
    """Drop sentences with K finished hypotheses or no live slot; reorder the stepper."""
    width = cfg.beam
    alive = torch.isfinite(beam.scores).any(dim=1).tolist()
    keep = [s for s, sent in enumerate(beam.active) if alive[s] and len(results[sent]) < cfg.finished_wanted]
    if not keep:
        return None
    index = torch.tensor(keep, device=beam.tokens.device)
    stepper.reorder(rows[index].view(-1))
    flat = (index[:, None] * width + torch.arange(width, device=index.device)).view(-1)
    return _Beam([beam.active[s] for s in keep], beam.tokens[flat], beam.token_lp[flat.cpu()], beam.scores[index])


def beam_search(stepper, start, bsz, cfg):
    """Algorithm 1: beam of W pairs, 3W candidates per step, stop at K finished, return the nbest.

    start: LongTensor ``(s,)``. The stepper must already hold ``bsz * W`` rows (sentence
    ``b`` in rows ``b*W .. b*W+W-1``). Returns ``bsz`` lists of up to ``nbest`` :class:`Finished`,
    best first.
    """
    width = cfg.beam
    scores = torch.full((bsz, width), NEG_INF, device=start.device)
    scores[:, 0] = 0.0  # B_0 = {start pair}; other slots empty
    beam = _Beam(list(range(bsz)), start.unsqueeze(0).repeat(bsz * width, 1),
                 torch.zeros(bsz * width, 0, dtype=torch.float64), scores)
    results = [[] for _ in range(bsz)]
    for step in range(1, cfg.max_steps + 1):
        # 1. DECODEBEAM, 2. DOUBLETOPK (3W), 3. FINALIZE top W with EOD, 4. EXPANDBEAM, 5. retire
        n = len(beam.active)
        lprobs = mask_scores(stepper.step(beam.tokens), cfg, step == cfg.max_steps).view(n, width, 2, -1)
        cand = list(double_topk(lprobs, beam.scores.to(lprobs), 3 * width))
        cand[1] = cand[1] + torch.arange(n, device=cand[1].device)[:, None] * width  # beam -> row
        has_eod = _finalize(beam, cand, step, start.numel(), cfg, results)
        beam, rows = _expand(beam, cand, has_eod, width)
        beam = _retire(beam, rows, results, cfg, stepper)
        if beam is None:
            break
    return [sorted(found, key=lambda f: -f.score)[: cfg.nbest] for found in results]
