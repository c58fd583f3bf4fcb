"""``--task speculative_translation``: fairseq's translation task plus the options of
the plugin's decoders; ``build_generator()`` dispatches on ``--decoding``."""
import dataclasses
import logging
import re
from dataclasses import field

from fairseq.dataclass import ChoiceEnum
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask

from fairseq_plugins.decoding import options
from fairseq_plugins.decoding.alignment import with_alignments
from fairseq_plugins.decoding.core import SpeculativeGenerator
from fairseq_plugins.decoding.registry import DECODERS, decoder_names, option_fields
from fairseq_plugins.training.cpu_autocast import CPU_AUTOCAST, CpuAutocastTraining, cpu_autocast_field
from fairseq_plugins_compat.errors import PluginError

logger = logging.getLogger(__name__)

DECODING_HELP = "decoding algorithm: beam: fairseq's own search (--beam N); " + "; ".join(
    f"{entry.name}: {entry.help}" for entry in DECODERS.values()
)


def _copy(f: dataclasses.Field):
    """(name, type, field) for ``make_dataclass``: a decoder option as a task option."""
    default = {"default_factory": f.default_factory} if f.default is dataclasses.MISSING else {"default": f.default}
    return f.name, f.type, field(metadata={"help": f.metadata.get("help", "")}, **default)


# fairseq's translation options + --decoding + every registered decoder's options
SpeculativeTranslationConfig = dataclasses.make_dataclass(
    "SpeculativeTranslationConfig",
    [("decoding", ChoiceEnum(decoder_names()), field(default="beam", metadata={"help": DECODING_HELP})),
     ("cpu_autocast", ChoiceEnum(CPU_AUTOCAST), cpu_autocast_field()),
     *[_copy(f) for f in option_fields().values()]],
    bases=(TranslationConfig,),
)


@register_task("speculative_translation", dataclass=SpeculativeTranslationConfig)
class SpeculativeTranslationTask(CpuAutocastTraining, TranslationTask):
    """Translation with a pluggable decoding algorithm (``--decoding``)."""

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
            plain = re.sub(r"np\.\w+\(([^()]*)\)", r"\1", str(error))  # numpy scalar reprs -> numbers
            raise PluginError(f"input longer than the models' max positions: {plain}") from None

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        if isinstance(getattr(self, "sequence_generator", None), SpeculativeGenerator):
            self.sequence_generator.repack = True  # --eval-bleu's: the weights change between validations
        return model

    def build_generator(self, models, args, seq_gen_cls=None, extra_gen_cls_kwargs=None, **kwargs):
        decoding = str(getattr(args, "decoding", None) or self.cfg.decoding)
        options.check_models_device(models)  # fp16 on CPU: one line for every decoding, beam included
        if decoding == "beam" or getattr(args, "score_reference", False):
            if decoding != "beam":  # as fairseq's --beam N: scoring the references replaces the search
                logger.info(f"--score-reference: the references are scored; --decoding {decoding} is not used")
            return super().build_generator(models, args, seq_gen_cls, extra_gen_cls_kwargs, **kwargs)
        if decoding not in DECODERS:
            raise PluginError(f"unknown decoding {decoding!r}; choose from {', '.join(decoder_names())}")
        entry = DECODERS[decoding]
        options.check_unused_options(self.cfg, entry, option_fields())
        opts = entry.read_options(self.cfg)
        options.check_block_size(getattr(opts, "block_size", None))  # before a builder's `or default`
        generator = entry.build(self, models, args, opts)
        return with_alignments(generator, models[0], self.target_dictionary, getattr(args, "print_alignment", None))
