"""Does a verifier trained on sequence-level distillation make its greedy output easier to draft?  (issue 12: the
SpecDec paper's verifier is a Seq-KD AT model; the demo verifier was trained on Multi30k's references)

The demo verifier's decoder (its layers, not the embeddings it shares with the encoder) is fine-tuned on a
distillation of the training set (``recipes/distill.sh``; BEAM=5: its own beam-5 output), the encoder and the shared
embeddings frozen, so that the demo drafter, which shares and fingerprints that encoder, still fits the new verifier.
Label-smoothed cross-entropy (0.1, as the verifier was trained), Adam at a constant learning rate after a linear
warm-up, bfloat16 autocast where the CPU has it.  The result is saved as a fairseq checkpoint with the verifier's
configuration; export it with ``python -m fairseq_plugins.scripts.export_checkpoint OUT SMALL --fp16``.

    python docs/experiments/seqkd_verifier.py DATA OUT [EPOCHS] [LR]

DATA: the binarized distillation (train and valid; train1, train2, ... beside train are read with it, so the
references can be mixed in by linking them there as train1); EPOCHS: passes over it (default 3); LR: default 1e-4;
VERIFIER: the verifier to start from (default the demo verifier); LOG_EVERY: print the training loss every N updates
(default 50); THREADS: torch threads (default 1); SAVE_EVERY: also save the model every N updates as
OUT with ``-uN`` before ``.pt`` (default 0: only at the end), for averaging with
``python -m fairseq_plugins.scripts.average_checkpoints``.
"""
import math
import os
import sys
import time

import torch

torch.set_num_threads(int(os.environ.get("THREADS", "1")))
from fairseq import checkpoint_utils
from fairseq.criterions.label_smoothed_cross_entropy import label_smoothed_nll_loss
from fairseq.tasks.translation import load_langpair_dataset

import fairseq_plugins  # noqa: F401  (the compat shims)

VERIFIER = os.environ.get("VERIFIER", "checkpoints/demo/verifier.pt")  # the verifier whose decoder is trained
MAX_TOKENS, WARMUP, SMOOTHING = 4096, 50, 0.1
LOG_EVERY = int(os.environ.get("LOG_EVERY", "50"))
SAVE_EVERY = int(os.environ.get("SAVE_EVERY", "0"))


def batches(task, data: str, split: str, epoch: int):
    dataset = load_langpair_dataset(data, split, "en", task.source_dictionary, "de", task.target_dictionary,
                                    combine=split == "train", dataset_impl=None, upsample_primary=1,
                                    left_pad_source=True, left_pad_target=False, max_source_positions=1024,
                                    max_target_positions=1024)
    iterator = task.get_batch_iterator(dataset, max_tokens=MAX_TOKENS, seed=1, max_positions=(1024, 1024),
                                       epoch=epoch, required_batch_size_multiple=8)
    return iterator.next_epoch_itr(shuffle=split == "train")


def loss_of(model, sample):
    """(label-smoothed loss summed over target tokens, NLL summed, target tokens)."""
    net_output = model(**sample["net_input"])
    lprobs = model.get_normalized_probs(net_output, log_probs=True).float()
    target = sample["target"]
    loss, nll = label_smoothed_nll_loss(lprobs.view(-1, lprobs.size(-1)), target.view(-1), SMOOTHING,
                                        ignore_index=model.decoder.dictionary.pad(), reduce=True)
    return loss, nll, sample["ntokens"]


def valid_nll(task, model, data: str) -> float:
    model.eval()
    total = tokens = 0.0
    with torch.no_grad():
        for sample in batches(task, data, "valid", 1):
            _, nll, n = loss_of(model, sample)
            total, tokens = total + float(nll), tokens + n
    model.train()
    return total / tokens / math.log(2)


def main(data: str, out: str, epochs: int = 3, lr: float = 1e-4):
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([VERIFIER], arg_overrides={"data": data})
    model = models[0].float()
    frozen = {id(p) for p in model.encoder.parameters()}
    trained = [p for p in model.parameters() if id(p) not in frozen]
    for p in model.encoder.parameters():
        p.requires_grad_(False)
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
            if SAVE_EVERY and update % SAVE_EVERY == 0:
                stem, extension = os.path.splitext(out)
                save(model, f"{stem}-u{update}{extension}")
            if update % LOG_EVERY == 0:
                print(f"epoch {epoch} update {update} loss {loss.item() / n / math.log(2):.3f} "
                      f"({time.time() - start:.0f} s)", flush=True)
        print(f"epoch {epoch} done: valid nll {valid_nll(task, model, data):.3f} bits/token "
              f"({time.time() - start:.0f} s)", flush=True)
    save(model, out)


def save(model, out: str):
    """The verifier's checkpoint with the model's weights: its configuration, so fairseq loads it as the verifier."""
    state = torch.load(VERIFIER, map_location="cpu", weights_only=False)
    state["model"] = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    state["optimizer_history"] = state.get("optimizer_history", [])[-1:]
    torch.save(state, out)
    print(f"saved {out}", flush=True)


if __name__ == "__main__":
    arguments = sys.argv[1:]
    if len(arguments) < 2:
        sys.exit(__doc__)
    main(arguments[0], arguments[1], *(int(arguments[2]),) if len(arguments) > 2 else (),
         *(float(arguments[3]),) if len(arguments) > 3 else ())
