"""Does a second drafter pass over its own draft (mask-predict's refinement) get more drafted tokens accepted?

Lossless SpecDec's prefix is always the verifier's greedy output, so its trajectory can be replayed exactly from that
output: at prefix p the drafter drafts k tokens, the verifier accepts the m that match greedy's next ones and adds its
own, p += m + 1.  Policies for the draft:
  one      the shipped drafter's one pass over k mask queries;
  keep=T   a second pass whose queries are the first pass's tokens where its probability >= T and masks elsewhere
           (glancing trained the drafter on such blocks, with gold tokens revealed); the masked positions take the
           second pass's argmax, the kept ones stay;
  all      the second pass with every first-pass token revealed, each position taking the second pass's argmax.
Prints tokens per iteration for each policy (a count, not a timing; a second pass costs one more drafter call).

    RUNS=... python docs/experiments/draft_refinement.py [N_SENT [SPLIT [DRAFTER [VERIFIER [DATA]]]]]
"""
import os
import sys

import torch

torch.set_num_threads(1)
RUNS = os.environ.get("RUNS", "../runs")
N_SENT = int(sys.argv[1]) if len(sys.argv) > 1 else 300
SPLIT = sys.argv[2] if len(sys.argv) > 2 else "valid"
DRAFTER = sys.argv[3] if len(sys.argv) > 3 else "checkpoints/demo/drafter.pt"
VERIFIER = sys.argv[4] if len(sys.argv) > 4 else "checkpoints/demo/verifier.pt"
DATA = sys.argv[5] if len(sys.argv) > 5 else RUNS + "/multi30k/bin"
K = 10
POLICIES = ["one", "keep=0.9", "keep=0.7", "keep=0.5", "all"]


def block_probs(decoder, encoder_out, prefix, queries):
    """prefix (1, P), queries (1, block_size) -> the drafter's probabilities (1, block_size, V); pad, bos and the
    mask symbol get none, as when it drafts."""
    logits = decoder.forward_block(encoder_out, prefix, torch.tensor([prefix.size(1)]), queries).float()
    logits[..., decoder.banned] = float("-inf")
    return logits.softmax(-1)


def draft(decoder, encoder_out, prefix, policy):
    """prefix (1, P) -> k drafted tokens (list) under ``policy``."""
    queries = decoder.mask_queries(1, decoder.block_size, prefix.device)
    probs, tokens = block_probs(decoder, encoder_out, prefix, queries).max(-1)
    if policy == "one":
        return tokens[0, :K].tolist()
    keep = torch.ones_like(tokens, dtype=torch.bool) if policy == "all" else probs >= float(policy.split("=")[1])
    second = block_probs(decoder, encoder_out, prefix, torch.where(keep, tokens, queries)).argmax(-1)
    refined = second if policy == "all" else torch.where(keep, tokens, second)
    return refined[0, :K].tolist()


def replay(decoder, encoder_out, greedy, eos, policy):
    """Iterations lossless SpecDec takes for the greedy output ``greedy`` (ends with eos) under ``policy``."""
    p, iterations = 0, 0
    while p < len(greedy):
        prefix = torch.tensor([[eos] + greedy[:p]])
        drafted = draft(decoder, encoder_out, prefix, policy)
        m = 0
        while m < len(drafted) and p + m < len(greedy) and drafted[m] == greedy[p + m]:
            m += 1
        p += m + 1
        iterations += 1
    return iterations


def main():
    from fairseq_plugins import inference
    from fairseq_plugins.api import Translator

    t = Translator.load(VERIFIER, DATA, drafter=DRAFTER, decoding="specdec", source_lang="en", target_lang="de",
                        max_len_a=1.2, max_len_b=10, draft_length="fixed")
    g = t.generator
    decoder = g.drafter.model.decoder
    eos = t.task.target_dictionary.eos()
    lines = open(f"{RUNS}/multi30k/spm/{SPLIT}.en").read().splitlines()
    tokens, iterations = 0, {policy: 0 for policy in POLICIES}
    with torch.inference_mode():
        for n, i in enumerate(range(0, len(lines), max(1, len(lines) // N_SENT))):
            src = inference.encode(t.task.source_dictionary, lines[i]).unsqueeze(0)
            sample = {"net_input": {"src_tokens": src, "src_lengths": torch.tensor([src.numel()])}}
            greedy = g.generate(t.models, sample)[0][0]["tokens"].tolist()
            encoder_out = t.models[0].encoder(src, src_lengths=torch.tensor([src.numel()]))
            tokens += len(greedy)
            for policy in POLICIES:
                iterations[policy] += replay(decoder, encoder_out, greedy, eos, policy)
            if n % 100 == 99:
                print(n + 1, {p: round(tokens / it, 3) for p, it in iterations.items()}, flush=True)
    print("sentences", n + 1, "tokens", tokens)
    for policy, it in iterations.items():
        print(f"{policy:10s} {tokens / it:.3f} tokens per iteration ({it} iterations)")


if __name__ == "__main__":
    main()
