"""A sequential head on the block drafter (Hydra's idea): does it draft like the autoregressive drafter?  (issue 12)

``autoregressive_drafts.py``: the shipped drafter drafting one token at a time reaches 4.79-4.99 tokens per iteration
against 3.87 as a block, but costs ~4x its call on this CPU.  Here the block call stays one call; only its output
changes: the state of query j (after the last layer and norm) gets a small residual block fed with the embedding of
the token drafted at j - 1 (for j = 1 the last accepted token), then the drafter's own output layer:

    x'_j = x_j + W2 relu(W1 [x_j ; E[t_{j-1}]])      W2 = 0 at the start: exactly the block drafter

so the block's tokens are drafted one after another by a head of two small products.  Only W1 and W2 train (the
drafter and its embeddings stay frozen), teacher-forced on the verifier's greedy translations of the training sources
(``fairseq-generate ... --gen-subset train --beam 1``, whose H- lines GEN names), random prefixes, the glancing-free
block of 10 queries.  Then lossless SpecDec with the head on the first N test2016 sentences counts tokens per
iteration (outputs asserted equal to the block drafter's: both are greedy's).

    RUNS=... GEN=train.gen [UPDATES=1500] [BATCH=64] [LR=1e-3] [THREADS=1] [HEAD=head.pt] \
        python docs/experiments/sequential_head.py [N]

HEAD: where the trained head's weights are saved; when the file exists, they are loaded instead of training.
"""
import os
import random
import sys
import time

import torch
from torch import nn

torch.set_num_threads(int(os.environ.get("THREADS", 1)))
import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)

from fairseq_plugins.decoding.specdec import BlockDrafter
from fairseq_plugins.models.sequential_head import SequentialHead as ProductHead


def SequentialHead(dim: int) -> ProductHead:
    """The head as this experiment built it (states and embeddings of one width); now the product's class, whose
    weights it saved (``fairseq_plugins.scripts.train_sequential_head`` trains it into a drafter checkpoint)."""
    return ProductHead(dim, dim)


def query_states(decoder, encoder_out, prefix, lengths):
    """The block's query states (B, Q, C) before the output layer (the drafter's ``forward_block``)."""
    output_layer = decoder.output_layer
    decoder.output_layer = lambda x: x
    try:
        return decoder.forward_block(encoder_out, prefix, lengths)
    finally:
        del decoder.output_layer
        assert decoder.output_layer == output_layer


def training_pairs(translator, gen_path):
    """[(source tokens, verifier's greedy target tokens + eos)] from fairseq-generate's H- lines."""
    from fairseq.data import data_utils

    task = translator.task
    sources = data_utils.load_indexed_dataset(f"{demo_pair.RUNS}/multi30k/bin/train.en-de.en", task.source_dictionary)
    pairs = []
    for line in open(gen_path):
        if line.startswith("H-"):
            index, _, text = line.rstrip("\n").split("\t")
            target = task.target_dictionary.encode_line(text, add_if_not_exist=False, append_eos=True).long()
            pairs.append((sources[int(index[2:])], target))
    return pairs


def train(translator, head, pairs, updates, batch_size, lr):
    decoder = translator.generator.drafter.model.decoder
    encoder = translator.models[0].encoder
    embed, project = decoder.embed_tokens.weight, decoder.output_layer
    pad, eos, k = decoder.padding_idx, translator.task.target_dictionary.eos(), decoder.block_size
    optimizer = torch.optim.Adam(head.parameters(), lr=lr)
    rng = random.Random(1)
    start = time.time()
    for update in range(1, updates + 1):
        batch = rng.sample(pairs, batch_size)
        src = torch.full((batch_size, max(len(s) for s, _ in batch)), pad)
        for i, (s, _) in enumerate(batch):
            src[i, src.size(1) - len(s):] = s  # left-padded, as fairseq feeds sources
        cut = [rng.randrange(len(t)) for _, t in batch]  # prefix: the first cut tokens of the target
        prefix = torch.full((batch_size, max(cut) + 1), pad)
        gold = torch.full((batch_size, k), pad)
        previous = torch.full((batch_size, k), pad)
        for i, ((_, t), c) in enumerate(zip(batch, cut)):
            row = torch.cat([torch.tensor([eos]), t])  # column 0 = eos, as the core's tokens
            prefix[i, :c + 1] = row[:c + 1]
            gold[i, :len(row[c + 1:c + 1 + k])] = row[c + 1:c + 1 + k]
            previous[i, :len(row[c:c + k])] = row[c:c + k]
        lengths = torch.tensor(cut) + 1
        with torch.no_grad():
            encoder_out = encoder(src, src_lengths=src.ne(pad).sum(1))
            x = query_states(decoder, encoder_out, prefix, lengths)[:, :k]
        logits = project(head(x, embed[previous].detach())).float()
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), gold.reshape(-1), ignore_index=pad)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if update % 100 == 0:
            print(f"update {update}: loss {loss.item():.3f} ({time.time() - start:.0f} s)", flush=True)


class HeadDrafter(BlockDrafter):
    """The block drafter, uncached, its block's tokens drafted one after another through ``head`` (batch 1)."""

    def __init__(self, model, head, **options):
        super().__init__(model, cached=False, **options)
        self.head = head

    @torch.no_grad()
    def propose(self, tokens, lengths, k):
        decoder = self.model.decoder
        length = int(lengths[0])
        x = query_states(decoder, self.encoder_out, tokens[:, :length], lengths)[0, :k]  # (k, C)
        embed, banned = decoder.embed_tokens.weight, decoder.banned
        previous = tokens[0, length - 1]
        drafted = []
        for j in range(k):
            logits = decoder.output_layer(self.head(x[j], embed[previous])).float()
            if self.vocab_limit:
                logits = logits[:self.vocab_limit]
            logits[[b for b in banned if b < logits.size(0)]] = float("-inf")
            previous = logits.argmax()
            drafted.append(previous)
        return torch.stack(drafted).unsqueeze(0)


def main(n: int):
    translator = demo_pair.load(draft_length="fixed", sentencepiece_model="checkpoints/demo/sentencepiece.model")
    block = translator.generator.drafter
    model = block.model
    for p in model.parameters():
        p.requires_grad_(False)
    head = SequentialHead(model.decoder.embed_tokens.embedding_dim).to(next(model.parameters()).dtype)
    saved = os.environ.get("HEAD")
    if saved and os.path.isfile(saved):
        head.load_state_dict(torch.load(saved))
    else:
        pairs = training_pairs(translator, os.environ["GEN"])
        print(f"{len(pairs)} training pairs")
        train(translator, head, pairs, int(os.environ.get("UPDATES", 1500)), int(os.environ.get("BATCH", 64)),
              float(os.environ.get("LR", 1e-3)))
        if saved:
            torch.save(head.state_dict(), saved)
    head.eval()
    sources = demo_pair.raw_sentences(n, "test")
    plain = HeadDrafter(model, SequentialHead(head.inner.in_features // 2).to(head.inner.weight.dtype),
                        vocab_limit=block.vocab_limit)  # W2 = 0: the block drafter itself, uncached
    lines_plain, plain_rate, _ = demo_pair.decode_with(translator, sources, plain)
    lines_head, head_rate, _ = demo_pair.decode_with(translator, sources,
                                                     HeadDrafter(model, head, vocab_limit=block.vocab_limit))
    assert lines_plain == lines_head, "the outputs differ: both must be greedy's"
    print(f"{len(sources)} test2016 sentences: block drafter {plain_rate:.3f} tokens per iteration, "
          f"with the sequential head {head_rate:.3f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
