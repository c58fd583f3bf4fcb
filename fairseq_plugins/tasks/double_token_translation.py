"""``--task double_token_translation``: translation with targets rearranged for
double-token bidirectional decoding (Imamura & Sumita, section 3.2) or one of the paper's
comparison orders (``--target-order``), trained and searched with
``--arch double_token_transformer*``.

EOD (end of decoding) is the dictionary's eos symbol; see ``double_token/reorder.py``.
"""
from dataclasses import dataclass, field

from fairseq.dataclass import ChoiceEnum
from fairseq.logging import metrics
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask

from fairseq_plugins.double_token.dataset import DecodingOrderDataset
from fairseq_plugins.double_token.generator import (
    PACKED_LINEARS,
    PAIR_BEAM_STOPS,
    DoubleTokenGenerator,
    PackedLinearsGenerator,
    ReorderingGenerator,
    check_generation_args,
)
from fairseq_plugins.double_token.reorder import TARGET_ORDERS, TOKENS_PER_STEP
from fairseq_plugins.training.cpu_autocast import CPU_AUTOCAST, CpuAutocastTraining, cpu_autocast_field
from fairseq_plugins_compat.errors import PluginError


@dataclass
class DoubleTokenTranslationConfig(TranslationConfig):
    target_order: ChoiceEnum(TARGET_ORDERS) = field(
        default="bidirectional",
        metadata={"help": "order the decoder emits the target in: bidirectional (the paper's head+tail pairs), "
                          "double_l2r / double_r2l (two contiguous tokens per step), "
                          "single_l2r / single_r2l (one token per step); use the same order to train and generate"},
    )
    pair_beam_stop: ChoiceEnum(PAIR_BEAM_STOPS) = field(
        default="beam",
        metadata={"help": "when the pair beam search (--beam W > 1, two-token orders) stops: beam (the default) = "
                          "once W hypotheses are finished, as fairseq's beam search, returning the best by "
                          "length-normalised score (--lenpen); nbest = once --nbest are finished (with --nbest 1 "
                          "the paper's K = 1: the first finished pair hypothesis wins; faster, but it favours short "
                          "outputs: on Multi30k valid beam 5 then scored below greedy)"},
    )
    packed_linears: ChoiceEnum(PACKED_LINEARS) = field(
        default="auto",
        metadata={"help": "auto (the default): on a CPU, the decoder's float32 products over several rows (a beam, "
                          "a token pair) use weights packed once in oneDNN's layout, for every --target-order alike: "
                          "PyTorch's F.linear re-arranges the whole weight on every such call (Multi30k valid, one "
                          "thread: bidirectional greedy 1.19x, beam 5 1.21x, single-token beam 5 1.25x the "
                          "tokens/s); one-row products (one-token greedy) and weights under 2**17 elements are "
                          "unchanged, others may differ in the last bits; off: F.linear throughout"},
    )
    cpu_autocast: ChoiceEnum(CPU_AUTOCAST) = cpu_autocast_field()


def _valid_bleu(meters) -> float:
    """Corpus BLEU of the validation hypotheses (fairseq's ``compute_bleu``), 0 when every
    hypothesis was empty (fairseq then logs none of the BLEU statistics)."""
    if "_bleu_totals" not in meters:
        return 0.0
    from sacrebleu.metrics import BLEU

    bleu = BLEU.compute_bleu(correct=meters["_bleu_counts"].sum, total=meters["_bleu_totals"].sum,
                             sys_len=meters["_bleu_sys_len"].sum, ref_len=meters["_bleu_ref_len"].sum,
                             smooth_method="exp")
    return round(bleu.score, 2)


@register_task("double_token_translation", dataclass=DoubleTokenTranslationConfig)
class DoubleTokenTranslationTask(CpuAutocastTraining, TranslationTask):
    """Translation whose decoder emits the target in ``--target-order``; hypotheses come back
    in natural order, so ``fairseq-generate``/``-interactive`` and BLEU work unchanged."""

    cfg: DoubleTokenTranslationConfig

    @property
    def target_order(self):
        return str(self.cfg.target_order)

    @property
    def tokens_per_step(self):
        return TOKENS_PER_STEP[self.target_order]

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        self.datasets[split] = DecodingOrderDataset(self.datasets[split], self.target_order, self.tgt_dict)

    def build_model(self, cfg, from_checkpoint=False):
        from fairseq_plugins.models.double_token_transformer import DoubleTokenTransformerModel

        model = super().build_model(cfg, from_checkpoint)
        if not isinstance(model, DoubleTokenTransformerModel):
            raise PluginError(f"--task double_token_translation needs --arch double_token_transformer*, "
                              f"not {type(model).__name__}")
        if isinstance(getattr(self, "sequence_generator", None), PackedLinearsGenerator):
            self.sequence_generator.repack = True  # --eval-bleu's: the weights change between validations
        return model

    def reduce_metrics(self, logging_outputs, criterion):
        """fairseq's, plus valid BLEU 0 when every hypothesis is empty (an early model): fairseq then
        logs no BLEU at all, and ``--best-checkpoint-metric bleu`` fails with a KeyError."""
        validation = any("_bleu_totals_0" in log for log in logging_outputs)  # training steps do not score BLEU
        if self.cfg.eval_bleu and validation:  # registered first, fairseq's own derived "bleu" is not added
            metrics.log_derived("bleu", _valid_bleu)
        super().reduce_metrics(logging_outputs, criterion)

    def build_generator(self, models, args, seq_gen_cls=None, extra_gen_cls_kwargs=None, **kwargs):
        """Algorithm 1 / greedy pair search for two tokens per step; fairseq's own search
        (reversed back for ``single_r2l``) for one."""
        generator = self._search(models, args, seq_gen_cls, extra_gen_cls_kwargs, **kwargs)
        if str(self.cfg.packed_linears) == "off":
            return generator
        return PackedLinearsGenerator(generator, models)

    def _search(self, models, args, seq_gen_cls=None, extra_gen_cls_kwargs=None, **kwargs):
        check_generation_args(models, args, self.target_order, extra_gen_cls_kwargs)
        if self.tokens_per_step == 2:
            return DoubleTokenGenerator(models[0], self.tgt_dict, self.target_order, args,
                                        stop=str(self.cfg.pair_beam_stop))
        generator = super().build_generator(models, args, seq_gen_cls, extra_gen_cls_kwargs, **kwargs)
        if self.target_order == "single_l2r":
            return generator
        return ReorderingGenerator(generator, self.tgt_dict, self.target_order)
