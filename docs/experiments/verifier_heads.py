"""Prototype: Medusa/blockwise-style heads on the frozen verifier's last decoder state.
Phase 1: teacher-forced features of the distilled (verifier-greedy) data; heads trained offline;
SpecDec tokens/iteration simulated on the distilled valid set (exact for lossless SpecDec: the
accepted prefix is the greedy output)."""
import os
RUNS = os.environ.get("RUNS", "../runs")  # where the recipes wrote multi30k/ (run from the repository root)
import sys, time, math, torch, torch.nn as nn, torch.nn.functional as F
torch.set_num_threads(1)
torch.manual_seed(0)
from fairseq import checkpoint_utils
from fairseq.data import data_utils
import fairseq_plugins  # noqa
BIN = RUNS + "/multi30k/distilled/bin"
K = int(sys.argv[1]) if len(sys.argv) > 1 else 4   # heads: y_{t+2} .. y_{t+1+K}
N = 3456  # draft vocabulary (most frequent entries)
models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(["checkpoints/demo/verifier.pt"],
                                                                   arg_overrides={"data": BIN})
v = models[0].eval()
d = task.target_dictionary

def features(split, limit=None):
    src = data_utils.load_indexed_dataset(f"{BIN}/{split}.en-de.en", task.source_dictionary)
    tgt = data_utils.load_indexed_dataset(f"{BIN}/{split}.en-de.de", d)
    n = len(src) if limit is None else min(limit, len(src))
    order = sorted(range(n), key=lambda i: (len(tgt[i]), len(src[i])))
    H, Y = [], []
    with torch.no_grad():
        for s in range(0, n, 64):
            idx = order[s:s + 64]
            S = max(len(src[i]) for i in idx); T = max(len(tgt[i]) for i in idx)
            st = torch.full((len(idx), S), d.pad()); tt = torch.full((len(idx), T), d.pad())
            prev = torch.full((len(idx), T), d.pad())
            for r, i in enumerate(idx):
                a, b = src[i].long(), tgt[i].long()
                st[r, S - len(a):] = a; tt[r, :len(b)] = b
                prev[r, 0] = d.eos(); prev[r, 1:len(b)] = b[:-1]
            enc = v.encoder(st, src_lengths=torch.tensor([len(src[i]) for i in idx]))
            x, _ = v.decoder(prev, encoder_out=enc, features_only=True)
            for r, i in enumerate(idx):
                L = len(tgt[i]); H.append(x[r, :L].half()); Y.append(tt[r, :L])
    return H, Y

t0 = time.time()
Hv, Yv = features("valid")
Ht, Yt = features("train")
print(f"features: {len(Ht)} train, {len(Hv)} valid sentences, {time.time()-t0:.0f}s", flush=True)

def pairs(H, Y):
    """Flattened states (P, C) and head targets (P, K) (-100 where past the end or outside N)."""
    hs, ys = [], []
    for h, y in zip(H, Y):
        L = len(y)
        tg = torch.full((L, K), -100, dtype=torch.long)
        for i in range(1, K + 1):
            if L - i > 0:
                tg[:L - i, i - 1] = y[i:]
        tg[tg >= N] = -100
        hs.append(h); ys.append(tg)
    return torch.cat(hs), torch.cat(ys)

class Heads(nn.Module):
    def __init__(self, C, K):
        super().__init__()
        self.lin = nn.ModuleList([nn.Linear(C, C) for _ in range(K)])
        for l in self.lin:
            nn.init.zeros_(l.weight); nn.init.zeros_(l.bias)
    def forward(self, h, E):
        return torch.stack([F.linear(h + F.silu(l(h)), E) for l in self.lin], 1)  # (P, K, N)

E = v.decoder.output_projection.weight[:N].detach().float()
heads = Heads(E.size(1), K)
opt = torch.optim.Adam(heads.parameters(), lr=float(sys.argv[2]) if len(sys.argv) > 2 else 1e-3)
Xt, Tt = pairs(Ht, Yt)
print("train positions", len(Xt), flush=True)

def simulate(H, Y, heads):
    """Tokens per iteration of lossless SpecDec with these heads (k = K), batch 1."""
    iters = toks = 0
    with torch.no_grad():
        for h, y in zip(H, Y):
            L = len(y); pos = 0; first = True
            pred = heads(h.float(), E).argmax(-1)  # (L, K): drafts after state t
            while pos < L:
                if first:
                    gain = 1; first = False  # no state yet: the verifier alone
                else:
                    t = pos - 1  # the state that chose y[pos-1] (the pending token); head i+1 drafts y[pos+i]
                    m = 0
                    for i in range(K):
                        if pos + i < L and int(pred[t, i]) == int(y[pos + i]): m += 1
                        else: break
                    gain = min(m + 1, L - pos)  # accepted drafts + the verifier's own token
                iters += 1; toks += gain; pos += gain
    return toks / iters

print("untrained heads: tokens/iter", round(simulate(Hv, Yv, heads), 3), flush=True)
B = 4096
for epoch in range(int(sys.argv[3]) if len(sys.argv) > 3 else 3):
    perm = torch.randperm(len(Xt)); t0 = time.time(); tot = 0
    for s in range(0, len(Xt), B):
        ix = perm[s:s + B]
        logits = heads(Xt[ix].float(), E)
        loss = F.cross_entropy(logits.reshape(-1, N), Tt[ix].reshape(-1), ignore_index=-100)
        opt.zero_grad(); loss.backward(); opt.step(); tot += float(loss)
    print(f"epoch {epoch+1}: loss {tot / math.ceil(len(Xt)/B):.3f} ({time.time()-t0:.0f}s); valid tokens/iter "
          f"{simulate(Hv, Yv, heads):.3f}", flush=True)
    torch.save(heads.state_dict(), f"{RUNS}/heads/heads_k{K}.pt")
