"""``--task speculative_translation``: fairseq's translation task plus the options of
the plugin's decoders; ``build_generator()`` dispatches on ``--decoding``."""
from dataclasses import dataclass, field
from typing import Optional

from fairseq.dataclass import ChoiceEnum
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask

from fairseq_plugins.decoding.registry import DECODERS, decoder_names
from fairseq_plugins_compat.errors import PluginError

DECODING_CHOICES = ChoiceEnum(decoder_names())
DECODING_HELP = "decoding algorithm: beam: fairseq's own search (--beam N); " + "; ".join(
    f"{name}: {help}" for name, (_build, help) in DECODERS.items()
)


@dataclass
class SpeculativeTranslationConfig(TranslationConfig):
    decoding: DECODING_CHOICES = field(
        default="beam",
        metadata={"help": DECODING_HELP},
    )
    drafter_path: Optional[str] = field(
        default=None, metadata={"help": "block NAT drafter checkpoint (--decoding specdec, specdec++, drafter-only)"}
    )
    block_size: Optional[int] = field(
        default=None,
        metadata={"help": "tokens drafted per iteration; default: the drafter's training block size "
                          "(specdec), the decoder's own default otherwise"},
    )
    beta: Optional[int] = field(
        default=None, metadata={"help": "SpecDec++: a drafted token passes if among the verifier's top-beta "
                                        "(default 1 for specdec, 3 for specdec++)"}
    )
    tau: Optional[float] = field(
        default=None, metadata={"help": "SpecDec++: ... and its log-probability is within tau of the top-1 "
                                        "(default 0 for specdec, 1.0 for specdec++; high-efficiency preset: --beta 5 --tau 3)"}
    )
    iad_match_length: int = field(
        default=1, metadata={"help": "IAD: output suffix length that must occur exactly once in the source"}
    )
    jacobi_init_token: ChoiceEnum(["pad", "unk"]) = field(
        default="pad", metadata={"help": "Jacobi family: token for positions not yet predicted"}
    )
    hybrid_length: Optional[int] = field(
        default=None, metadata={"help": "hybrid-jacobi: GS-Jacobi blocks up to this output length h, then "
                                        "autoregressive (default: no limit, i.e. PGJ); 0 = greedy"}
    )


@register_task("speculative_translation", dataclass=SpeculativeTranslationConfig)
class SpeculativeTranslationTask(TranslationTask):
    """Translation with a pluggable decoding algorithm (``--decoding``)."""

    cfg: SpeculativeTranslationConfig

    extra_max_positions = None  # (source, target) limits of a loaded drafter

    def max_positions(self):
        if self.extra_max_positions is None:
            return super().max_positions()
        return tuple(min(a, b) for a, b in zip(super().max_positions(), self.extra_max_positions))

    def filter_indices_by_size(self, indices, dataset, max_positions=None, ignore_invalid_inputs=False):
        """fairseq raises a bare Exception (a traceback) for a too long input: one line instead."""
        try:
            return super().filter_indices_by_size(indices, dataset, max_positions, ignore_invalid_inputs)
        except Exception as error:
            if "is invalid" not in str(error):
                raise
            raise PluginError(f"input longer than the models' max positions: {error}") from None

    def build_generator(self, models, args, seq_gen_cls=None, extra_gen_cls_kwargs=None, **kwargs):
        decoding = str(getattr(args, "decoding", None) or self.cfg.decoding)
        if decoding == "beam":
            return super().build_generator(models, args, seq_gen_cls, extra_gen_cls_kwargs, **kwargs)
        if decoding not in DECODERS:
            raise PluginError(f"unknown decoding {decoding!r}; choose from {', '.join(decoder_names())}")
        build, _help = DECODERS[decoding]
        return build(self, models, args, **kwargs)
