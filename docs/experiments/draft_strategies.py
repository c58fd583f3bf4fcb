"""What other uses of the same drafter would gain, simulated exactly on Multi30k valid.

1. The demo drafter's top-3 tokens and probabilities at every prefix of the verifier's greedy
   output (teacher forcing = what lossless SpecDec sees: its prefix is always greedy's), saved.
2. Each strategy's exact lossless trajectory over them: tokens per iteration, verified block
   tokens per iteration, and tokens per ms under a cost model: an iteration costs ITER_MS,
   each verified token more or less than the 11 of a whole block ROW_MS (the core verifies a
   draft up to its first EOS: the plain block is shorter than 11 near the end of a sentence)
   (docs/experiments/verifier_block_cost.py: 7.73 ms at 11, 9.28 ms at 21 tokens).

Strategies: plain (the whole block of k), a confidence cut (the block cut where the product
of the drafter's probabilities falls below a threshold: b2ba164's --draft-confidence, removed), and draft trees: the drafter's 2nd/3rd
token as a branch at each of the first B positions, followed by `tail` of the main draft.
Run from the repository root: RUNS=... python docs/experiments/draft_strategies.py [N_SENT [ITER_MS ROW_MS]]"""
import json, os, sys
import torch
torch.set_num_threads(1)
RUNS = os.environ.get("RUNS", "../runs")
N_SENT = int(sys.argv[1]) if len(sys.argv) > 1 else 300
ITER_MS = float(sys.argv[2]) if len(sys.argv) > 2 else 15.1
ROW_MS = float(sys.argv[3]) if len(sys.argv) > 3 else 0.15
K = 10
CACHE = f"{RUNS}/draft_strategies_{N_SENT}.json"


def teacher_forced_drafts():
    from fairseq_plugins.api import Translator
    from fairseq_plugins import inference
    from fairseq_plugins.decoding.drafters import BatchStart
    t = Translator.load("checkpoints/demo/verifier.pt", RUNS + "/multi30k/bin", drafter="checkpoints/demo/drafter.pt",
                        decoding="specdec", source_lang="en", target_lang="de", max_len_a=1.2, max_len_b=10)
    g, drafter = t.generator, t.generator.drafter
    lines = open(f"{RUNS}/multi30k/spm/valid.en").read().splitlines()
    data = []
    with torch.no_grad():
        for i in range(0, len(lines), max(1, len(lines) // N_SENT)):
            src = inference.encode(t.task.source_dictionary, lines[i]).unsqueeze(0)
            lengths = torch.tensor([src.numel()])
            y = g.generate(t.models, {"net_input": {"src_tokens": src, "src_lengths": lengths}})[0][0]["tokens"].tolist()
            drafter.start(BatchStart(src, lengths, 200, g.verifier.encoder(src, src_lengths=lengths)))
            tokens = torch.tensor([[2] + y + [1] * (K + 2)])
            top, prob = [], []
            for p in range(len(y)):  # the prefix: eos + y[:p]
                values, indices = drafter.propose(tokens, torch.tensor([p + 1]), K).lprobs[0].topk(3, -1)
                top.append(indices.tolist()); prob.append(values.exp().tolist())
            data.append({"y": y, "top": top, "p": prob})
    return data


def run(data, strategy):
    """Mean tokens per iteration, verified tokens per iteration, tokens per ms."""
    iterations = tokens = verified = 0
    for s in data:
        y, p = s["y"], 0
        while p < len(y):
            gain, rows = strategy(s["top"][p], s["p"][p], y, p)
            gain = min(gain, len(y) - p)
            iterations += 1; tokens += gain; verified += rows; p += gain
    ms = iterations * ITER_MS + ROW_MS * (verified - (K + 1) * iterations)
    return tokens / iterations, verified / iterations, tokens / ms


def matched(draft, y, p, start=0, limit=K):
    n = start
    while n < min(len(draft), limit) and p + n < len(y) and draft[n] == y[p + n]:
        n += 1
    return n - start


def useful(main, width=K):
    """Drafted tokens the core verifies: up to and including the first EOS (id 2)."""
    return min(width, main.index(2) + 1) if 2 in main[:width] else width


def plain(top, prob, y, p):
    main = [t[0] for t in top]
    return matched(main, y, p) + 1, useful(main) + 1


def confidence(threshold):
    def strategy(top, prob, y, p):
        width, product = K, 1.0
        for j in range(K):
            if product < threshold:
                width = j; break
            product *= prob[j][0]
        main = [t[0] for t in top]
        return matched(main, y, p, limit=width) + 1, useful(main, width) + 1
    return strategy


def tree(first, width, tail):
    def strategy(top, prob, y, p):
        main = [t[0] for t in top]
        rows = useful(main) + 1 + (width - 1) * sum(1 + min(tail, K - 1 - i) for i in range(first))
        n = matched(main, y, p)
        best = n + 1
        if n < first and p + n < len(y):
            for w in range(1, width):
                if top[n][w] == y[p + n]:
                    best = max(best, n + 1 + matched(main, y, p, start=n + 1, limit=n + 1 + tail) + 1)
        return best, rows
    return strategy


if __name__ == "__main__":
    data = json.load(open(CACHE)) if os.path.exists(CACHE) else teacher_forced_drafts()
    json.dump(data, open(CACHE, "w"))
    rows = [("plain (whole block)", plain)]
    rows += [(f"confidence cut at {th}", confidence(th)) for th in (0.05, 0.1, 0.2, 0.3)]
    rows += [(f"tree: top-{w} at the first {b} positions + {tail} main drafts", tree(b, w, tail))
             for b in (2, 3, 10) for w in (2, 3) for tail in (0, 2)]
    base = run(data, plain)[2]
    print(f"{len(data)} valid sentences; cost model: {ITER_MS} ms per iteration, {ROW_MS} ms per verified token +- 11")
    print("| strategy | tokens / iteration | verified tokens / iteration | tokens per ms vs plain |\n|---|---|---|---|")
    for name, strategy in rows:
        tok, verified, rate = run(data, strategy)
        print(f"| {name} | {tok:.2f} | {verified:.1f} | {rate / base:.3f} |")
