"""``--task double_token_translation``: translation with targets rearranged for
double-token bidirectional decoding (Imamura & Sumita, section 3.2) or one of the paper's
comparison orders (``--target-order``), trained and searched with
``--arch double_token_transformer*``.

EOD (end of decoding) is the dictionary's eos symbol; see ``double_token/reorder.py``.
"""
from dataclasses import dataclass, field

from fairseq.dataclass import ChoiceEnum
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask

from fairseq_plugins.double_token.dataset import DecodingOrderDataset
from fairseq_plugins.double_token.generator import (
    DoubleTokenGenerator,
    ReorderingGenerator,
    check_generation_args,
)
from fairseq_plugins.double_token.reorder import TARGET_ORDERS, TOKENS_PER_STEP
from fairseq_plugins_compat.errors import PluginError


@dataclass
class DoubleTokenTranslationConfig(TranslationConfig):
    target_order: ChoiceEnum(TARGET_ORDERS) = field(
        default="bidirectional",
        metadata={"help": "order the decoder emits the target in: bidirectional (the paper's head+tail pairs), "
                          "double_l2r / double_r2l (two contiguous tokens per step), "
                          "single_l2r / single_r2l (one token per step); use the same order to train and generate"},
    )


@register_task("double_token_translation", dataclass=DoubleTokenTranslationConfig)
class DoubleTokenTranslationTask(TranslationTask):
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
        return model

    def build_generator(self, models, args, seq_gen_cls=None, extra_gen_cls_kwargs=None, **kwargs):
        """Algorithm 1 / greedy pair search for two tokens per step; fairseq's own search
        (reversed back for ``single_r2l``) for one."""
        check_generation_args(models, args, self.target_order, extra_gen_cls_kwargs)
        if self.tokens_per_step == 2:
            return DoubleTokenGenerator(models[0], self.tgt_dict, self.target_order, args)
        generator = super().build_generator(models, args, seq_gen_cls, extra_gen_cls_kwargs, **kwargs)
        if self.target_order == "single_l2r":
            return generator
        return ReorderingGenerator(generator, self.tgt_dict, self.target_order)
