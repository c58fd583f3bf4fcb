"""A decoder defined in the test suite only (``FAIRSEQ_PLUGINS_DECODERS``, set in conftest):
it drafts the last accepted token again.  Registering it here is all it takes to appear in
``fairseq-generate --help``, run through fairseq-generate and the latency harness, and be
covered by the registry-derived parity tests (tests/test_registry.py)."""
from dataclasses import dataclass, field

from fairseq_plugins.decoding.builder import build_speculative
from fairseq_plugins.decoding.drafters import Drafter
from fairseq_plugins.decoding.options import DraftLengthOptions
from fairseq_plugins.decoding.registry import register_decoder


@dataclass
class RepeatLastOptions(DraftLengthOptions):
    repeat_default_k: int = field(default=2, metadata={"help": "repeat-last: k when --block-size is not given"})


class RepeatLastDrafter(Drafter):
    def propose(self, tokens, lengths, k):
        last = tokens.gather(1, (lengths - 1).unsqueeze(1))
        return last.expand(-1, k)


@register_decoder("repeat-last", "test decoder: drafts the last accepted token k times, identical to greedy",
                  RepeatLastOptions)
def build_repeat_last(task, models, args, opts):
    block_size = opts.block_size or opts.repeat_default_k
    return build_speculative(task, models, args, "repeat-last", RepeatLastDrafter(), opts, block_size)
