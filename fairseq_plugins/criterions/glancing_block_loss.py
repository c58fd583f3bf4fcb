"""``--criterion glancing_block_loss``: train the block drafter (SpecDec 3.1 + GLAT).

For every sentence a prefix length p is drawn uniformly from {0, .., m} (m = target
length without eos; p = m asks for the eos alone); the drafter predicts the next k gold
tokens, positions past the target's eos are left out of the loss.  Glancing: a first
pass without gradient drafts the block, its Hamming distance d to the gold block is
counted, floor(ratio * d) random block positions are revealed with their gold tokens and
the loss (label smoothed) is taken on the remaining ones.  The ratio anneals linearly
(paper: 0.5 -> 0.3 over the run).  ``--position-weight-decay g`` < 1 weighs block position j
(0-based) by g^j, scaled to a mean weight of 1 over the block: SpecDec uses a drafted token only
when every one before it passed, so the first positions count most (paper: 1, uniform).
Validation draws prefixes with a fixed seed per batch and never glances, so ``glance_acc``
there is the drafter's block accuracy.

Validation also simulates vanilla SpecDec against each valid target (unless
``--no-spec-eval``): from p = 0, the drafter proposes its k-token argmax block after the
prefix target[:p] (``model.propose``, the decoding core's distribution), the n leading
tokens equal to target[p:p+k] are accepted plus one token of the verifier, p += n + 1, until
the target and its eos are covered.  ``spec_tokens_per_iter`` = target tokens (eos included)
/ iterations.  When the valid targets are the verifier's greedy translations (distill.sh,
DISTILL_VALID=1, BEAM=1) this is exactly the tokens per iteration lossless SpecDec gets with
k = block size (up to max-length caps): select checkpoints with
``--best-checkpoint-metric spec_tokens_per_iter --maximize-best-checkpoint-metric``.
"""
import math
from dataclasses import dataclass, field

import torch
from omegaconf import II

from fairseq import metrics, utils
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import label_smoothed_nll_loss
from fairseq.dataclass import FairseqDataclass

from fairseq_plugins.models import drafter_blocks
from fairseq_plugins_compat.errors import PluginError


@dataclass
class GlancingBlockLossConfig(FairseqDataclass):
    label_smoothing: float = field(default=0.1, metadata={"help": "label smoothing epsilon (paper: 0.1)"})
    glance_ratio_start: float = field(default=0.5, metadata={"help": "glancing ratio at update 0 (paper: 0.5)"})
    glance_ratio_end: float = field(default=0.3, metadata={"help": "glancing ratio at the end of the annealing (paper: 0.3)"})
    glance_anneal_updates: int = field(
        default=0, metadata={"help": "updates over which the ratio anneals linearly; 0: --max-update "
                                     "(if that is 0 too, the ratio stays at the start value)"})
    position_weight_decay: float = field(
        default=1.0, metadata={"help": "weigh the loss at block position j (0-based) by this ** j, scaled to a mean "
                                       "weight of 1 (SpecDec only uses a drafted token when all before it passed); "
                                       "1: uniform, the paper's"})
    valid_seed: int = field(default=1, metadata={"help": "seed of the prefix lengths drawn in validation"})
    no_spec_eval: bool = field(
        default=False, metadata={"help": "validation: do not simulate SpecDec (no spec_tokens_per_iter; faster)"})
    spec_eval_stride: int = field(
        default=1, metadata={"help": "validation: simulate SpecDec on every N-th sentence of each batch only (faster)"})
    max_update: int = II("optimization.max_update")


@register_criterion("glancing_block_loss", dataclass=GlancingBlockLossConfig)
class GlancingBlockLoss(FairseqCriterion):
    def __init__(self, task, label_smoothing, glance_ratio_start, glance_ratio_end, glance_anneal_updates,
                 valid_seed, max_update, no_spec_eval=False, spec_eval_stride=1, position_weight_decay=1.0):
        super().__init__(task)
        if not 0.0 < position_weight_decay <= 1.0:
            raise PluginError(f"--position-weight-decay must be in (0, 1], got {position_weight_decay}")
        self.position_decay = position_weight_decay
        self.eps = label_smoothing
        self.ratio_start, self.ratio_end = glance_ratio_start, glance_ratio_end
        self.anneal_updates = glance_anneal_updates or max_update or 0
        self.valid_seed = valid_seed
        self.spec_eval = not no_spec_eval
        self.spec_eval_stride = max(1, spec_eval_stride)

    def glance_ratio(self, num_updates):
        return drafter_blocks.glance_ratio(num_updates, self.ratio_start, self.ratio_end, self.anneal_updates)

    def draw_blocks(self, model, sample):
        """prefix (B, P), prefix_lengths (B,), gold (B, k) for this batch; generator for glancing."""
        target = sample["target"]
        generator = None
        if not model.training:
            generator = torch.Generator().manual_seed(self.valid_seed * 1_000_003 + int(sample["id"].sum()))
        p = drafter_blocks.sample_prefix_lengths(target, self.padding_idx, generator)
        prefix, prefix_lengths, gold = drafter_blocks.make_blocks(
            target, p, model.block_size, self.padding_idx, self.task.target_dictionary.eos())
        return prefix, prefix_lengths, gold, generator

    def forward(self, model, sample, reduce=True):
        """Returns (loss summed over loss tokens, sample_size = #loss tokens, logging output)."""
        prefix, prefix_lengths, gold, generator = self.draw_blocks(model, sample)
        ratio = self.glance_ratio(getattr(model, "num_updates", 0)) if model.training else 0.0
        net_input = sample["net_input"]
        logits, extra = model(net_input["src_tokens"], net_input["src_lengths"], prefix,
                              prefix_lengths=prefix_lengths, gold=gold, glance_ratio=ratio, generator=generator)
        valid = gold.ne(self.padding_idx)
        reveal = extra["reveal"] if extra["reveal"] is not None else torch.zeros_like(valid)
        in_loss = valid & ~reveal
        lprobs = utils.log_softmax(logits, dim=-1, onnx_trace=False)
        loss, nll_loss = self.block_loss(lprobs, gold, in_loss)
        n_loss = int(in_loss.sum())
        if n_loss == 0:  # everything revealed (ratio 1 on a wrong block): keep the graph, no signal
            loss = nll_loss = logits.sum() * 0.0
        n_valid = int(valid.sum())
        logging_output = {
            "loss": loss.data, "nll_loss": nll_loss.data, "ntokens": n_valid, "nsentences": gold.size(0),
            "sample_size": max(n_loss, 1), "n_correct": int((extra["first_pass"].eq(gold) & valid).sum()),
            "n_revealed": int(reveal.sum()), "glance_ratio_sum": ratio * gold.size(0),
        }
        if self.spec_eval and not model.training:
            rows = slice(None, None, self.spec_eval_stride)
            logging_output["spec_tokens"], logging_output["spec_iters"] = simulate_specdec(
                model, net_input["src_tokens"][rows], net_input["src_lengths"][rows], sample["target"][rows],
                self.padding_idx, self.task.target_dictionary.eos())
        return loss, max(n_loss, 1), logging_output

    def block_loss(self, lprobs, gold, in_loss):
        """(label-smoothed loss, nll loss), summed over the ``in_loss`` (B, k) positions of lprobs (B, k, V),
        each weighted by :func:`position_weights` (the nll loss unweighted, comparable across decays)."""
        if self.position_decay == 1.0:
            return label_smoothed_nll_loss(lprobs[in_loss], gold[in_loss], self.eps, reduce=True)
        loss, nll_loss = label_smoothed_nll_loss(lprobs[in_loss], gold[in_loss], self.eps, reduce=False)
        weights = position_weights(gold.size(1), self.position_decay, lprobs)[None, :].expand_as(gold)[in_loss]
        return (loss * weights).sum(), nll_loss.sum()

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        def total(key):
            return sum(log.get(key, 0) for log in logging_outputs)

        sample_size, ntokens, nsentences = total("sample_size"), total("ntokens"), total("nsentences")
        metrics.log_scalar("loss", total("loss") / max(sample_size, 1) / math.log(2), sample_size, round=3)
        metrics.log_scalar("nll_loss", total("nll_loss") / max(sample_size, 1) / math.log(2), sample_size, round=3)
        metrics.log_derived("ppl", lambda meters: utils.get_perplexity(meters["nll_loss"].avg))
        metrics.log_scalar("_n_correct", total("n_correct"))
        metrics.log_scalar("_n_valid", ntokens)
        metrics.log_derived(
            "glance_acc",
            lambda meters: round(meters["_n_correct"].sum / max(meters["_n_valid"].sum, 1), 4),
        )
        metrics.log_scalar("glance_ratio", total("glance_ratio_sum") / max(nsentences, 1), nsentences, round=3)
        metrics.log_scalar("revealed", total("n_revealed") / max(ntokens, 1), ntokens, round=3)
        if total("spec_iters") > 0:
            metrics.log_scalar("_spec_tokens", total("spec_tokens"))
            metrics.log_scalar("_spec_iters", total("spec_iters"))
            metrics.log_derived(
                "spec_tokens_per_iter",
                lambda meters: round(meters["_spec_tokens"].sum / max(meters["_spec_iters"].sum, 1), 4),
            )

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True


def position_weights(k: int, decay: float, like: torch.Tensor) -> torch.Tensor:
    """(k,) weights decay ** j of block positions j = 0..k-1, scaled to mean 1."""
    weights = decay ** torch.arange(k, dtype=like.dtype, device=like.device)
    return weights * (k / weights.sum())


@torch.no_grad()
def simulate_specdec(model, src_tokens, src_lengths, target, pad, eos):
    """Vanilla SpecDec against ``target`` (B, T) (right-padded, each row ends with eos), all
    rows at once, each at its own position p.  Returns (target tokens incl. eos, iterations),
    both summed over the batch."""
    lengths = target.ne(pad).sum(1)
    encoder_out = model.encoder(src_tokens, src_lengths=src_lengths)
    p = torch.zeros_like(lengths)
    iterations = 0
    while True:
        rows = (p < lengths).nonzero().squeeze(1)
        if rows.numel() == 0:
            return int(lengths.sum()), iterations
        prefix, prefix_lengths, _ = drafter_blocks.make_blocks(target[rows], p[rows], 1, pad, eos)
        k = max(1, min(model.block_size, model.decoder.max_positions() - int(prefix_lengths.max())))
        _, _, gold = drafter_blocks.make_blocks(target[rows], p[rows], k, pad, eos)
        draft = model.propose(model.encoder.reorder_encoder_out(encoder_out, rows), prefix, prefix_lengths, k)
        accepted = (draft.eq(gold) & gold.ne(pad)).long().cumprod(1).sum(1)
        p[rows] += accepted + 1
        iterations += rows.numel()
