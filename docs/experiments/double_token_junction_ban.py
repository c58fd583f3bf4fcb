"""Experiment (not in the package): greedy bidirectional decoding with a junction ban. A pair's
left token may not repeat the right token of the step before and vice versa, and the two tokens of
a pair may not be equal (the lower-scoring side takes its second best); EOD is exempt. These are
the tokens that become neighbours where the halves meet. ``plain``: the same search without the
ban (the package's greedy output).
Runs fairseq-generate with it: ``python docs/experiments/double_token_junction_ban.py ban|plain
DATA --user-dir fairseq_plugins --task double_token_translation --target-order bidirectional ...``
(the other options as in double_token_repeats.py), then compare the two outputs with it."""
import sys

import torch

from fairseq_plugins.double_token import generator as gen_mod
from fairseq_plugins.double_token.search import mask_scores, _finished

def greedy_search(stepper, start, bsz, cfg):
    active = list(range(bsz))
    tokens = start.unsqueeze(0).repeat(bsz, 1)
    token_lp = torch.zeros(bsz, 0, dtype=torch.float64)
    results = [[] for _ in range(bsz)]
    s = start.numel()
    for step in range(1, cfg.max_steps + 1):
        lprobs = mask_scores(stepper.step(tokens), cfg, step == cfg.max_steps)
        if BAN and step > 1 and step < cfg.max_steps:
            prev_l, prev_r = tokens[:, -2], tokens[:, -1]
            lprobs = lprobs.clone()
            rows = torch.arange(lprobs.size(0))
            ok_r = prev_r.ne(cfg.eod); ok_l = prev_l.ne(cfg.eod)
            lprobs[rows[ok_r], 0, prev_r[ok_r]] = float("-inf")
            lprobs[rows[ok_l], 1, prev_l[ok_l]] = float("-inf")
        top_lp, top = lprobs.topk(2, dim=-1)  # (N, 2, 2)
        best_lp, best = top_lp[:, :, 0].clone(), top[:, :, 0].clone()
        if BAN:
            same = best[:, 0].eq(best[:, 1]) & best[:, 0].ne(cfg.eod)
            for r in same.nonzero().flatten().tolist():
                a = top_lp[r, 0, 0] + top_lp[r, 1, 1]  # keep left, second right
                b = top_lp[r, 0, 1] + top_lp[r, 1, 0]
                if a >= b:
                    best[r, 1], best_lp[r, 1] = top[r, 1, 1], top_lp[r, 1, 1]
                else:
                    best[r, 0], best_lp[r, 0] = top[r, 0, 1], top_lp[r, 0, 1]
        tokens = torch.cat([tokens, best], dim=1)
        token_lp = torch.cat([token_lp, best_lp.double().cpu()], dim=1)
        done = best.eq(cfg.eod).any(dim=1).tolist()
        for row in (r for r, d in enumerate(done) if d):
            generated = tokens[row, s:].tolist()
            results[active[row]].append(_finished(generated, token_lp[row].tolist(), cfg.lenpen, step))
        keep = [r for r, d in enumerate(done) if not d]
        if not keep:
            break
        if len(keep) < len(done):
            rows = torch.tensor(keep, device=tokens.device)
            stepper.reorder(rows)
            active, tokens, token_lp = [active[r] for r in keep], tokens[rows], token_lp[rows.cpu()]
    return results
BAN = sys.argv.pop(1) == "ban"  # read by greedy_search
gen_mod.greedy_search = greedy_search
from fairseq_cli.generate import cli_main
cli_main()
