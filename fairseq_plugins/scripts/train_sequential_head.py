"""``python -m fairseq_plugins.scripts.train_sequential_head DATA --drafter IN --save-to OUT``: add a sequential head
to a trained block drafter and train it, the drafter frozen (``models/sequential_head.py``).

The head learns to draft the block's token j from the block's state at j and the token before it, teacher-forced on
the training pairs of DATA, a binarized fairseq folder: the verifier's greedy distillation the drafter was trained on
(``recipes/distill.sh``), whose targets are what lossless SpecDec accepts.  Each update takes a random prefix of
``--batch-size`` random pairs.  OUT is a drafter checkpoint with the head (``--sequential-head``); export it small
with ``fairseq_plugins.scripts.export_checkpoint --fp16``.  A drafter that already has a head goes on training it."""
import argparse
import logging
import random
import time
from argparse import Namespace

import torch
from torch import nn

from fairseq_plugins.scripts import output_file, save_atomically
from fairseq_plugins.scripts.export_checkpoint import inference_checkpoint
from fairseq_plugins_compat.checkpoint_loading import load_checkpoint_file
from fairseq_plugins_compat.errors import PluginError, exit_on_plugin_error

logger = logging.getLogger("fairseq_plugins.scripts.train_sequential_head")


def load_pairs(data: str, split: str, source_lang: str, target_lang: str, drafter_path: str):
    """(the drafter with a head, its task, the split's dataset of {"source", "target"} pairs)."""
    from fairseq import checkpoint_utils

    from fairseq_plugins.models.sequential_head import SequentialHead, head_of

    overrides = {"data": data}
    overrides.update({name: lang for name, lang in (("source_lang", source_lang), ("target_lang", target_lang))
                      if lang})
    try:
        models, _cfg, task = checkpoint_utils.load_model_ensemble_and_task([drafter_path], arg_overrides=overrides)
    except FileNotFoundError as missing:
        raise PluginError(f"{missing.filename} does not exist") from None
    model = models[0]
    if not hasattr(model.decoder, "block_size"):
        raise PluginError(f"{drafter_path} is not a block drafter checkpoint")
    decoder = model.decoder
    if head_of(decoder) is None:  # a fresh head (torch's seed)
        decoder.sequential_head = SequentialHead(decoder.output_embed_dim, decoder.embed_tokens.embedding_dim)
    try:
        task.load_dataset(split, combine=True)
    except FileNotFoundError as missing:
        raise PluginError(f"no {split} split in {data} ({missing})") from None
    return model, task, task.dataset(split)


def sample_batch(dataset, rng: random.Random, batch_size: int, k: int, pad: int, eos: int):
    """Random pairs, each cut at a random point of its target: left-padded sources (B, S), prefixes (B, P) (column 0
    eos, right-padded), their lengths (B,), the block's gold tokens (B, k) and the token before each (B, k)."""
    pairs = [dataset[i] for i in rng.sample(range(len(dataset)), min(batch_size, len(dataset)))]
    sources = [p["source"] for p in pairs]
    targets = [torch.cat([torch.tensor([eos]), p["target"]]) for p in pairs]  # column 0 = eos, as the core's
    cuts = [rng.randrange(len(t) - 1) for t in targets]  # the prefix: eos + the first c tokens
    src = torch.full((len(pairs), max(len(s) for s in sources)), pad)
    prefix = torch.full((len(pairs), max(cuts) + 1), pad)
    gold, previous = torch.full((len(pairs), k), pad), torch.full((len(pairs), k), pad)
    for i, (s, t, c) in enumerate(zip(sources, targets, cuts)):
        src[i, src.size(1) - len(s):] = s
        prefix[i, :c + 1] = t[:c + 1]
        block = t[c + 1:c + 1 + k]
        gold[i, :len(block)] = block
        previous[i, :len(block)] = t[c:c + len(block)]
    return src, prefix, torch.tensor(cuts) + 1, gold, previous


def head_loss(model, batch, device):
    """Cross-entropy of the head's drafts (teacher-forced) and of the block's own, over the gold tokens."""
    src, prefix, lengths, gold, previous = (t.to(device) for t in batch)
    decoder = model.decoder
    with torch.no_grad():
        encoder_out = model.encoder(src, src_lengths=src.ne(decoder.padding_idx).sum(1))
        states = decoder.forward_block(encoder_out, prefix, lengths, features_only=True)[:, :gold.size(1)]
    corrected = decoder.sequential_head(states, decoder.embed_tokens(previous).detach())
    flat_gold = gold.reshape(-1)

    def loss_of(x):
        logits = decoder.output_layer(x).float()
        return nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), flat_gold,
                                           ignore_index=decoder.padding_idx)

    with torch.no_grad():
        block = loss_of(states)
    return loss_of(corrected), block


def train(model, dataset, updates: int, batch_size: int, lr: float, seed: int, device, log_every: int = 100):
    """Train the head only; logs the head's and the block's loss every ``log_every`` updates."""
    for p in model.parameters():
        p.requires_grad_(False)
    head = model.decoder.sequential_head
    for p in head.parameters():
        p.requires_grad_(True)
    model.eval()  # no dropout: the drafter is frozen, the head has none
    optimizer = torch.optim.Adam(head.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda u: 1 - 0.9 * u / updates)  # lr -> lr / 10
    rng = random.Random(seed)
    decoder = model.decoder
    eos = decoder.dictionary.eos()
    start, total, block_total = time.time(), 0.0, 0.0
    for update in range(1, updates + 1):
        batch = sample_batch(dataset, rng, batch_size, decoder.block_size, decoder.padding_idx, eos)
        loss, block = head_loss(model, batch, device)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        total, block_total = total + loss.item(), block_total + block.item()
        if update % log_every == 0 or update == updates:
            n = log_every if update % log_every == 0 else update % log_every
            logger.info(f"update {update}/{updates}: loss {total / n:.3f} with the head, {block_total / n:.3f} the "
                        f"block's own ({time.time() - start:.0f} s)")
            total, block_total = 0.0, 0.0


def save(model, drafter_path: str, path: str):
    """The drafter checkpoint ``drafter_path`` as an inference checkpoint (``export_checkpoint``'s: no optimizer or
    training state, no machine paths) with the model's weights (the head's included) and ``--sequential-head`` set."""
    state = load_checkpoint_file(drafter_path)
    for holder in (state.get("args"), (state.get("cfg") or {}).get("model")):
        if isinstance(holder, Namespace):
            holder.sequential_head = True
        elif holder is not None:
            holder["sequential_head"] = True
    weights = {name: t.detach().cpu() for name, t in model.state_dict().items()}
    save_atomically(inference_checkpoint(state, weights), path)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m fairseq_plugins.scripts.train_sequential_head",
                                     description=__doc__.split(": ", 1)[1])
    parser.add_argument("data", help="binarized fairseq folder of the training pairs (the drafter's distillation)")
    parser.add_argument("--drafter", required=True, help="the trained block drafter checkpoint")
    parser.add_argument("--save-to", required=True, help="where to write the drafter with its head")
    parser.add_argument("--source-lang", "-s", default=None, help="source language (default: from DATA's files)")
    parser.add_argument("--target-lang", "-t", default=None, help="target language (default: from DATA's files)")
    parser.add_argument("--split", default="train", help="the split of DATA to train on (default train; its "
                                                         "shards train1, train2 ... with it)")
    parser.add_argument("--updates", type=int, default=3000, help="Adam updates (default 3000: ~10 min on 2 cores "
                                                                  "for the Multi30k demo drafter)")
    parser.add_argument("--batch-size", type=int, default=64, help="pairs per update (default 64)")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate at the start, falling "
                                                                 "linearly to lr / 10 (default 1e-3)")
    parser.add_argument("--seed", type=int, default=1, help="the head's initialisation and the sampling (default 1)")
    parser.add_argument("--log-every", type=int, default=100, help="log the mean losses every N updates "
                                                                    "(default 100)")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (default: PyTorch's)")
    parser.add_argument("--cpu", action="store_true", help="train on the CPU even when CUDA is available")
    args = parser.parse_args(argv)
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s", level=logging.INFO)
    for name, value in (("--updates", args.updates), ("--batch-size", args.batch_size),
                        ("--log-every", args.log_every)):
        if value < 1:
            raise PluginError(f"{name} must be >= 1, got {value}")
    if args.threads:
        torch.set_num_threads(args.threads)
    out = output_file(args.save_to)
    device = torch.device("cuda" if torch.cuda.is_available() and not args.cpu else "cpu")
    torch.manual_seed(args.seed)
    model, _task, dataset = load_pairs(args.data, args.split, args.source_lang, args.target_lang, args.drafter)
    head = model.decoder.sequential_head
    model.float().to(device)
    logger.info(f"{len(dataset)} training pairs; the head's {sum(p.numel() for p in head.parameters()):,} weights "
                f"train, the drafter is frozen")
    train(model, dataset, args.updates, args.batch_size, args.lr, args.seed, device, args.log_every)
    save(model, args.drafter, out)
    print(f"wrote {args.save_to}")


def cli_main():
    exit_on_plugin_error(main, "train_sequential_head")


if __name__ == "__main__":
    cli_main()
