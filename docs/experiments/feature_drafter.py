"""Does the verifier's hidden state, or its distribution, help the block drafter?  (issue 12: EAGLE's and
DistillSpec's ideas on a block NAT drafter)

Copies of the demo drafter are fine-tuned side by side on the same batches of the verifier's greedy
distillation (glancing loss, ratio 0.3, Adam), the arms named in ARMS (default plain,feature):
  plain:   as shipped (the control: what more fine-tuning alone does);
  feature: each prefix column j's input embedding also gets W h_{j-1}, h the frozen verifier's last
           decoder state after reading token j-1 (teacher-forced, what the decoding core's
           ``Iteration.hidden`` gives a drafter for free); W (C_v -> C) starts at zero, so this arm
           starts exactly at the shipped drafter;
  kl:      the shipped drafter, its loss (1 - KL_WEIGHT) * the glancing loss + KL_WEIGHT * KL(verifier || drafter)
           at the same block positions: the verifier's whole next-token distribution after the greedy prefix
           (teacher-forced) as a soft target instead of its argmax alone;
  grown:   the shipped drafter with one decoder layer more on top, a copy of the verifier's layer of that index (for
           the 2-layer drafter its third; what ``drafter_layers.py grow`` builds), gated as
           x + g (layer(x) - x) with g a learned scalar starting at GATE_INIT (default 0: ReZero, this arm starts
           exactly at the shipped drafter; 1: no gate, a plain 3-layer drafter, which the product can load as it is);
           the new layer and g learn at GROW_LR (default 3e-4).
Every EVAL updates all arms are scored by ``simulate_specdec`` (lossless SpecDec's tokens per iteration at
k = 10 against the verifier's greedy translations of the valid set: a count, not a timing).

    RUNS=... [DATA=bin] [DEVICE=cuda] [TRAIN_SECONDS=N] python docs/experiments/feature_drafter.py UPDATES EVAL \
        [MAX_TOKENS] [OUT.json]

DATA: the binarized greedy distillation by the demo verifier (default $RUNS/multi30k/distilled/bin, recipes/distill.sh
with the demo verifier as TEACHER; for the pair shipped on 2026-12-02: $RUNS/v3/greedy/bin or $RUNS/v5/greedy/bin);
TRAIN_SECONDS: stop (and score both) after that many seconds of training even before UPDATES;
PROJECTION_LR: W's learning rate (the drafter's own: 1e-4); KL_WEIGHT: the kl arm's weight (default 0.5);
THREADS: torch threads (default 1); BF16=1: train under CPU bfloat16 autocast (what ``--cpu-autocast bf16`` does);
SAVE_PREFIX: after each evaluation save each arm's weights to SAVE_PREFIX<arm>.pt (state dict, with ``feature_proj``);
INIT=verifier: start every arm over (the recipe's start: decoder layers, final layer norm and positions from the
verifier's first layers; the shared frozen encoder and embeddings are the verifier's already) instead of from the
shipped drafter; LR (default 1e-4) and WARMUP (default 0: none): the drafter's peak learning rate and fairseq's
inverse-sqrt warm-up over WARMUP updates (W's rate scales alike).
"""
import contextlib
import json
import os
import sys
import time

import torch

torch.set_num_threads(int(os.environ.get("THREADS", "1")))
torch.manual_seed(1)
from fairseq import utils
from fairseq.tasks.translation import load_langpair_dataset

from fairseq_plugins.api import Translator
from fairseq_plugins.criterions.glancing_block_loss import GlancingBlockLoss, simulate_specdec
from fairseq_plugins.models.block_drafter_decoder import BlockDrafterDecoder
from fairseq_plugins.models.drafter_init import copy_verifier_decoder

RUNS = os.environ.get("RUNS", "../runs")
updates, every = int(sys.argv[1]), int(sys.argv[2])
max_tokens = int(sys.argv[3]) if len(sys.argv) > 3 else 2048
out_path = sys.argv[4] if len(sys.argv) > 4 else None
data = os.environ.get("DATA", f"{RUNS}/multi30k/distilled/bin")
device = os.environ.get("DEVICE", "cpu")
seconds = float(os.environ.get("TRAIN_SECONDS", "inf"))
projection_lr = float(os.environ.get("PROJECTION_LR", "1e-4"))  # 1e-3: Adam's first step alone cost 0.024 (CPU run)
arm_names = os.environ.get("ARMS", "plain,feature").split(",")
kl_weight = float(os.environ.get("KL_WEIGHT", "0.5"))
grow_lr = float(os.environ.get("GROW_LR", "3e-4"))
gate_init = float(os.environ.get("GATE_INIT", "0"))
save_prefix = os.environ.get("SAVE_PREFIX")
if os.environ.get("INIT", "drafter") not in ("drafter", "verifier"):
    sys.exit(f"INIT={os.environ['INIT']}: use drafter (the shipped drafter, the default) or verifier (start over)")
start_over = os.environ.get("INIT", "drafter") == "verifier"
peak_lr, warmup = float(os.environ.get("LR", "1e-4")), int(os.environ.get("WARMUP", "0"))
bfloat16 = os.environ.get("BF16") == "1"
autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if bfloat16 else contextlib.nullcontext


def load():
    t = Translator.load("checkpoints/demo/verifier.pt", data, drafter="checkpoints/demo/drafter.pt",
                        decoding="specdec", source_lang="en", target_lang="de", device=device)
    return t.task, t.models[0], t.generator.drafter.model.to(device)


task, verifier, first = load()
arms = {arm_names[0]: first, **{name: load()[2] for name in arm_names[1:]}}
shipped_layers = len(first.decoder.layers)
if start_over:
    verifier_weights = {name: tensor.detach().cpu() for name, tensor in verifier.state_dict().items()}
    for model in arms.values():
        copy_verifier_decoder(model.decoder, verifier_weights, "first", "the demo verifier")
for p in verifier.parameters():
    p.requires_grad_(False)
verifier.eval()
if "grown" in arms:
    import copy

    class GatedLayer(torch.nn.Module):
        """``layer`` blended in by a learned scalar: x + g (layer(x) - x), g = GATE_INIT at the start."""

        def __init__(self, layer):
            super().__init__()
            self.layer, self.gate = layer, torch.nn.Parameter(torch.tensor(gate_init))

        def forward(self, x, *args, **kwargs):
            y, attn, state = self.layer(x, *args, **kwargs)
            return x + self.gate * (y - x), attn, state

    grown_decoder = arms["grown"].decoder
    added = copy.deepcopy(verifier.decoder.layers[shipped_layers]).requires_grad_(True)  # as drafter_layers.py grow
    grown_decoder.layers.append((added if gate_init == 1 else GatedLayer(added)).to(device))
    grown_decoder.num_layers = len(grown_decoder.layers)
if "feature" in arms:
    feature = arms["feature"]
    dim_v, dim_d = verifier.decoder.output_projection.weight.size(1), feature.decoder.embed_tokens.weight.size(1)
    feature.decoder.feature_proj = torch.nn.Linear(dim_v, dim_d).to(device)
    torch.nn.init.zeros_(feature.decoder.feature_proj.weight)
    torch.nn.init.zeros_(feature.decoder.feature_proj.bias)

original_embed_block = BlockDrafterDecoder.embed_block
last_features = {}  # the glancing pass embeds the same prefix twice (first pass, then with glanced queries)


def verifier_features(prefix, encoder_out):
    """The frozen verifier's last decoder states (B, P, C_v) over ``prefix`` (B, P), reused for a repeated call."""
    if last_features.get("encoder_out") is not encoder_out or not torch.equal(last_features["prefix"], prefix):
        with torch.no_grad():
            hidden, _ = verifier.decoder(prefix, encoder_out=encoder_out, features_only=True)
        last_features.update(encoder_out=encoder_out, prefix=prefix, hidden=hidden)
    return last_features["hidden"]


def embed_block(self, tokens, prefix_lengths, query_start, encoder_out):
    """The shipped embedding; with a ``feature_proj``, prefix column j also gets W h_{j-1}."""
    x = original_embed_block(self, tokens, prefix_lengths, query_start, encoder_out)
    if not hasattr(self, "feature_proj"):
        return x
    hidden = verifier_features(tokens[:, :query_start], encoder_out)
    shifted = torch.cat([hidden.new_zeros(hidden.size(0), 1, hidden.size(2)), hidden[:, :-1]], dim=1)
    added = torch.cat([self.feature_proj(shifted), x.new_zeros(x.size(0), x.size(1) - query_start, x.size(2))], 1)
    return x + added


BlockDrafterDecoder.embed_block = embed_block
datasets = {split: load_langpair_dataset(data, split, "en", task.source_dictionary, "de", task.target_dictionary,
                                         combine=split == "train", dataset_impl=None, upsample_primary=1,
                                         left_pad_source=True, left_pad_target=False, max_source_positions=1000,
                                         max_target_positions=1000)
            for split in ("train", "valid")}


def batches(split, epoch, shuffle):
    iterator = task.get_batch_iterator(datasets[split], max_tokens=max_tokens, seed=1, epoch=epoch,
                                       max_positions=(1000, 1000)).next_epoch_itr(shuffle=shuffle)
    return (utils.move_to_cuda(sample) if device == "cuda" else sample for sample in iterator)


criterion = GlancingBlockLoss(task, 0.1, 0.3, 0.3, 0, 1, 0)
optimizers = {}
new_layer = f"decoder.layers.{shipped_layers}."  # the grown arm's added layer
for name, model in arms.items():
    projection = [p for n, p in model.named_parameters() if n.startswith("decoder.feature_proj")]
    grown = [p for n, p in model.named_parameters() if n.startswith(new_layer)]
    rest = [p for n, p in model.named_parameters()
            if p.requires_grad and not n.startswith("decoder.feature_proj") and not n.startswith(new_layer)]
    groups = ([{"params": rest, "lr": peak_lr}] + ([{"params": projection, "lr": projection_lr}] if projection else [])
              + ([{"params": grown, "lr": grow_lr}] if grown else []))
    optimizers[name] = torch.optim.Adam(groups, betas=(0.9, 0.98))
schedulers = {name: torch.optim.lr_scheduler.LambdaLR(
    optimizer, lambda step: 1.0 if warmup == 0 else min((step + 1) / warmup, (warmup / (step + 1)) ** 0.5))
    for name, optimizer in optimizers.items()}


def verifier_log_probs(sample):
    """The frozen verifier's teacher-forced log-probs (B, T, V) over the sample's (greedy) targets."""
    src = sample["net_input"]
    with torch.no_grad():
        out = verifier(src["src_tokens"], src["src_lengths"], src["prev_output_tokens"])
        return verifier.get_normalized_probs(out, log_probs=True)


def kl_loss(model, sample, draw):
    """(1 - KL_WEIGHT) * the glancing loss + KL_WEIGHT * KL(verifier || drafter), summed over the loss's
    block positions (gold column j of row b is target position p_b + j, p_b = prefix length - 1)."""
    captured = {}

    def forward(*args, **kwargs):
        captured["out"] = type(model).forward(model, *args, **kwargs)
        return captured["out"]
    model.forward = forward
    try:
        loss, sample_size, logging_output = criterion(model, sample)
    finally:
        del model.forward
    logits, extra = captured["out"]
    _, prefix_lengths, gold, _ = draw
    in_loss = gold.ne(criterion.padding_idx)
    if extra["reveal"] is not None:
        in_loss &= ~extra["reveal"]
    teacher = verifier_log_probs(sample)  # (B, T, V)
    positions = (prefix_lengths - 1).unsqueeze(1) + torch.arange(gold.size(1), device=gold.device)  # (B, k)
    positions = positions.clamp(max=teacher.size(1) - 1)
    assert torch.equal(sample["target"].gather(1, positions)[in_loss], gold[in_loss])
    teacher = teacher.gather(1, positions.unsqueeze(-1).expand(-1, -1, teacher.size(2)))[in_loss]  # (N, V)
    student = torch.log_softmax(logits.float(), dim=-1)[in_loss]
    kl = (teacher.exp() * (teacher - student)).sum()
    return (1 - kl_weight) * loss + kl_weight * kl, sample_size, logging_output


def evaluate(model):
    model.eval()
    tokens = iters = 0
    for sample in batches("valid", 1, False):
        src = sample["net_input"]
        n, i = simulate_specdec(model, src["src_tokens"], src["src_lengths"], sample["target"],
                                task.target_dictionary.pad(), task.target_dictionary.eos())
        tokens, iters = tokens + n, iters + i
    return tokens / iters


curve = {name: [(0, evaluate(model))] for name, model in arms.items()}
print("update 0", {n: round(c[-1][1], 3) for n, c in curve.items()}, flush=True)
step, epoch, start = 0, 1, time.time()
while step < updates:
    for sample in batches("train", epoch, True):
        draw = criterion.draw_blocks(next(iter(arms.values())), sample)
        criterion.draw_blocks = lambda *_: draw  # all arms train on the same blocks
        for name, model in arms.items():
            model.train()
            model.encoder.eval()
            with autocast():
                loss, sample_size, _ = kl_loss(model, sample, draw) if name == "kl" else criterion(model, sample)
            optimizers[name].zero_grad()
            (loss / sample_size).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizers[name].step()
            schedulers[name].step()
        del criterion.draw_blocks
        step += 1
        if time.time() - start > seconds:
            updates = step
        if step % every == 0 or step == updates:
            for name, model in arms.items():
                curve[name].append((step, evaluate(model)))
            print(f"update {step} ({time.time() - start:.0f} s)", {n: round(c[-1][1], 3) for n, c in curve.items()},
                  flush=True)
            if out_path:
                json.dump(curve, open(out_path, "w"))
            if save_prefix:
                for name, model in arms.items():
                    torch.save(model.state_dict(), f"{save_prefix}{name}.pt")
        if step >= updates:
            break
    epoch += 1
