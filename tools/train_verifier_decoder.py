"""Train a verifier's decoder on a distillation, its encoder and the embeddings it shares with the decoder frozen.

A drafter that shares its verifier's encoder records that encoder's fingerprint, and decoding refuses any other
verifier.  Training the decoder alone improves the verifier (here: on a stronger teacher's translations, sequence-level
distillation) and keeps the encoder, so the drafter still fits it.  Label-smoothed cross-entropy (0.1, as the verifier
was trained), Adam at a constant learning rate after a linear warm-up of 50 updates, bfloat16 autocast where the CPU
has it.  Each saved file is a fairseq checkpoint with the verifier's configuration; average snapshots with
``python -m fairseq_plugins.scripts.average_checkpoints`` and export with
``python -m fairseq_plugins.scripts.export_checkpoint IN OUT --fp16``.

    python tools/train_verifier_decoder.py DATA OUT --verifier VERIFIER [--epochs 1] [--lr 2e-4] [--save-every 150]

DATA: a binarized folder (``recipes/distill.sh``'s ``bin``: train, train1, ... are read together, valid scores each
epoch).  With ``--save-every N`` the model is also saved every N updates, as OUT with ``-uN`` before ``.pt``.
"""
import argparse
import math
import os
import time

import torch

MAX_TOKENS, WARMUP, SMOOTHING = 4096, 50, 0.1


def batches(task, data: str, split: str, epoch: int):
    """An epoch's batches of ``split`` (train: every train* file, shuffled), at most MAX_TOKENS tokens each."""
    from fairseq.tasks.translation import load_langpair_dataset

    dataset = load_langpair_dataset(data, split, task.cfg.source_lang, task.source_dictionary, task.cfg.target_lang,
                                    task.target_dictionary, combine=split == "train", dataset_impl=None,
                                    upsample_primary=1, left_pad_source=True, left_pad_target=False,
                                    max_source_positions=1024, max_target_positions=1024)
    iterator = task.get_batch_iterator(dataset, max_tokens=MAX_TOKENS, seed=1, max_positions=(1024, 1024),
                                       epoch=epoch, required_batch_size_multiple=8)
    return iterator.next_epoch_itr(shuffle=split == "train")


def loss_of(model, sample):
    """(label-smoothed loss summed over the batch's target tokens, NLL summed, number of target tokens)."""
    from fairseq.criterions.label_smoothed_cross_entropy import label_smoothed_nll_loss

    lprobs = model.get_normalized_probs(model(**sample["net_input"]), log_probs=True).float()  # (B, T, V)
    target = sample["target"]  # (B, T)
    loss, nll = label_smoothed_nll_loss(lprobs.view(-1, lprobs.size(-1)), target.view(-1), SMOOTHING,
                                        ignore_index=model.decoder.dictionary.pad(), reduce=True)
    return loss, nll, sample["ntokens"]


def valid_nll(task, model, data: str) -> float:
    """Negative log-likelihood of valid's targets, in bits per token."""
    model.eval()
    total = tokens = 0.0
    with torch.no_grad():
        for sample in batches(task, data, "valid", 1):
            _, nll, n = loss_of(model, sample)
            total, tokens = total + float(nll), tokens + n
    model.train()
    return total / tokens / math.log(2)


def frozen_encoder(model):
    """Freeze the encoder (and so the embeddings it shares with the decoder); the decoder's other weights."""
    frozen = {id(p) for p in model.encoder.parameters()}
    for p in model.encoder.parameters():
        p.requires_grad_(False)
    return [p for p in model.parameters() if id(p) not in frozen]


def save(model, verifier: str, out: str):
    """``verifier``'s checkpoint with the model's weights (its configuration, so fairseq loads it as the verifier)."""
    state = torch.load(verifier, map_location="cpu", weights_only=False)
    state["model"] = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    state["optimizer_history"] = state.get("optimizer_history", [])[-1:]
    from fairseq_plugins.scripts import save_atomically

    save_atomically(state, out)  # a recipe takes an existing snapshot for a finished one
    print(f"saved {out}", flush=True)


def train(data: str, out: str, verifier: str, epochs: int = 1, lr: float = 2e-4, save_every: int = 0,
          log_every: int = 50):
    from fairseq import checkpoint_utils

    import fairseq_plugins  # noqa: F401  (the compat shims)

    models, _, task = checkpoint_utils.load_model_ensemble_and_task([verifier], arg_overrides={"data": data})
    model = models[0].float()
    trained = frozen_encoder(model)
    print(f"training {sum(p.numel() for p in trained):,} of {sum(p.numel() for p in model.parameters()):,} "
          "parameters (the encoder and the shared embeddings frozen)", flush=True)
    optimizer = torch.optim.Adam(trained, lr=lr, betas=(0.9, 0.98), eps=1e-8)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=torch.backends.mkldnn.is_available()
                              and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    model.train()
    print(f"start: valid nll {valid_nll(task, model, data):.3f} bits/token", flush=True)
    update, start = 0, time.time()
    for epoch in range(1, epochs + 1):
        for sample in batches(task, data, "train", epoch):
            update += 1
            for group in optimizer.param_groups:
                group["lr"] = lr * min(1.0, update / WARMUP)
            with autocast:
                loss, _, n = loss_of(model, sample)
            optimizer.zero_grad()
            (loss / n).backward()
            optimizer.step()
            if save_every and update % save_every == 0:
                stem, extension = os.path.splitext(out)
                save(model, verifier, f"{stem}-u{update}{extension}")
            if update % log_every == 0:
                print(f"epoch {epoch} update {update} loss {loss.item() / n / math.log(2):.3f} "
                      f"({time.time() - start:.0f} s)", flush=True)
        print(f"epoch {epoch} done: valid nll {valid_nll(task, model, data):.3f} bits/token "
              f"({time.time() - start:.0f} s)", flush=True)
    save(model, verifier, out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", help="binarized folder of the pairs to learn (train*, valid)")
    parser.add_argument("out", help="where to save the trained verifier")
    parser.add_argument("--verifier", required=True, help="the verifier whose decoder is trained")
    parser.add_argument("--epochs", type=int, default=1, help="passes over the training pairs (default 1)")
    parser.add_argument("--lr", type=float, default=2e-4, help="Adam's learning rate after warm-up (default 2e-4)")
    parser.add_argument("--save-every", type=int, default=0, help="also save every N updates (default 0: at the end)")
    parser.add_argument("--log-every", type=int, default=50, help="print the training loss every N updates")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    train(args.data, args.out, args.verifier, args.epochs, args.lr, args.save_every, args.log_every)


if __name__ == "__main__":
    main()
