"""``--task speculative_translation``: fairseq's translation task plus the options of
the plugin's decoders; ``build_generator()`` dispatches on ``--decoding``."""
from dataclasses import dataclass, field

from fairseq.dataclass import ChoiceEnum
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask

from fairseq_plugins.decoding.registry import DECODERS, decoder_names

DECODING_CHOICES = ChoiceEnum(decoder_names())


@dataclass
class SpeculativeTranslationConfig(TranslationConfig):
    decoding: DECODING_CHOICES = field(
        default="beam",
        metadata={"help": "decoding algorithm: 'beam' is fairseq's own search (--beam N); "
                          "the others are the plugin's parallel decoders"},
    )


@register_task("speculative_translation", dataclass=SpeculativeTranslationConfig)
class SpeculativeTranslationTask(TranslationTask):
    """Translation with a pluggable decoding algorithm (``--decoding``)."""

    cfg: SpeculativeTranslationConfig

    def build_generator(self, models, args, seq_gen_cls=None, extra_gen_cls_kwargs=None, **kwargs):
        decoding = str(getattr(args, "decoding", None) or self.cfg.decoding)
        if decoding == "beam":
            return super().build_generator(models, args, seq_gen_cls, extra_gen_cls_kwargs, **kwargs)
        build, _help = DECODERS[decoding]
        return build(self, models, args, **kwargs)
