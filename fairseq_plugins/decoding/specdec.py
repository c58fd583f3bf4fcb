"""SpecDec / SpecDec++ (GAD / GAD++): a block NAT drafter proposes k tokens, the AT
verifier checks them in one pass.  ``--decoding specdec`` is lossless (beta=1, tau=0);
``--decoding specdec++`` is the paper's high-quality preset (beta=3, tau=1.0), and the
high-efficiency preset is ``--beta 5 --tau 3.0``.  ``--decoding drafter-only`` accepts
every drafted block (the paper's "NAT drafter" row)."""
import atexit
import logging

import torch

from fairseq_plugins.decoding import options
from fairseq_plugins.decoding.core import SpeculativeGenerator
from fairseq_plugins.decoding.drafters import Drafter
from fairseq_plugins.decoding.registry import register_decoder
from fairseq_plugins_compat.errors import PluginError

logger = logging.getLogger(__name__)

PRESETS = {"specdec": (1, 0.0), "specdec++": (3, 1.0)}  # name -> (beta, tau)


class BlockDrafter(Drafter):
    """Adapts a trained block NAT drafter model (``propose(encoder_out, prefix, lengths, k)``)."""

    def __init__(self, model):
        self.model = model
        model.eval()
        self.encoder_out = None

    def start(self, src_tokens, src_lengths, max_len):
        max_source = self.model.max_positions()[0] if isinstance(self.model.max_positions(), tuple) else None
        if max_source is not None and src_tokens.size(1) > max_source:
            raise PluginError(f"input of {src_tokens.size(1)} tokens is longer than the drafter's max source positions ({max_source})")
        self.encoder_out = self.model.encoder(src_tokens, src_lengths=src_lengths)

    def propose(self, tokens, lengths, k):
        prefix = tokens[:, : int(lengths.max())]
        return self.model.propose(self.encoder_out, prefix, lengths, k)

    def keep_rows(self, rows):
        self.encoder_out = self.model.encoder.reorder_encoder_out(self.encoder_out, rows)


def load_drafter(task, verifier):
    """Load ``--drafter-path`` onto the verifier's device/dtype and check compatibility."""
    from fairseq import checkpoint_utils

    from fairseq_plugins.compatibility import check_compatibility

    path = task.cfg.drafter_path
    if not path:
        raise PluginError("--decoding specdec needs --drafter-path (a block drafter checkpoint)")
    models, _cfg, drafter_task = checkpoint_utils.load_model_ensemble_and_task([path])
    drafter = models[0]
    param = next(verifier.parameters())
    drafter.to(device=param.device, dtype=param.dtype)
    check_compatibility(drafter, verifier, drafter_task.target_dictionary, task.target_dictionary, task.cfg.block_size)
    task.extra_max_positions = drafter.max_positions()
    return drafter


def _log_at_exit(generator, name):
    atexit.register(generator.stats.log_summary, name)


def build_speculative(task, models, args, name, drafter, block_size, beta=1, tau=0.0):
    options.check_generation_args(args, name)
    options.check_models_device(models)
    if len(models) != 1:
        raise PluginError(f"--decoding {name} verifies with one model; got an ensemble of {len(models)}")
    cfg = options.speculative_config(args, block_size, beta, tau)
    options.report_as_greedy(args)
    generator = SpeculativeGenerator(models[0], task.target_dictionary, drafter, cfg)
    _log_at_exit(generator, name)
    return generator


def _build_specdec(name):
    def build(task, models, args, **kwargs):
        drafter = load_drafter(task, models[0])
        beta, tau = PRESETS[name]
        beta = task.cfg.beta if task.cfg.beta is not None else beta
        tau = task.cfg.tau if task.cfg.tau is not None else tau
        block_size = task.cfg.block_size or drafter.block_size
        return build_speculative(task, models, args, name, BlockDrafter(drafter), block_size, beta, tau)

    return build


register_decoder("specdec", "SpecDec: block NAT drafter + AT verifier, identical to greedy")(_build_specdec("specdec"))
register_decoder("specdec++", "SpecDec++: top-beta/tau relaxed acceptance (default beta=3, tau=1.0)")(_build_specdec("specdec++"))


class DrafterOnlyGenerator:
    """Accept every drafted block: the drafter decodes alone (block by block)."""

    def __init__(self, drafter_model, tgt_dict, block_size, args):
        self.drafter = BlockDrafter(drafter_model)
        self.block_size = block_size
        self.eos, self.pad = tgt_dict.eos(), tgt_dict.pad()
        self.args = args

    @torch.no_grad()
    def generate(self, models, sample, **kwargs):
        src_tokens, src_lengths = sample["net_input"]["src_tokens"], sample["net_input"]["src_lengths"]
        max_len_a, max_len_b = getattr(self.args, "max_len_a", 0.0), getattr(self.args, "max_len_b", 200)
        max_len = min(int(max_len_a * src_tokens.size(1) + max_len_b),
                      self.drafter.model.max_positions()[1] - 1)
        self.drafter.start(src_tokens, src_lengths, max_len)
        bsz = src_tokens.size(0)
        tokens = src_tokens.new_full((bsz, max_len + self.block_size + 2), self.pad)
        tokens[:, 0] = self.eos
        lengths = src_tokens.new_ones(bsz)
        iterations = 0
        while int(lengths.max()) <= max_len and not bool(self._finished(tokens).all()):
            k = min(self.block_size, max_len + 1 - int(lengths.max()))  # every row has the same length
            drafts = self.drafter.propose(tokens, lengths, k)
            columns = lengths.unsqueeze(1) + torch.arange(k, device=tokens.device)
            tokens.scatter_(1, columns, drafts)
            lengths = lengths + k
            iterations += 1
        return [[self._hypothesis(tokens[i], max_len, iterations)] for i in range(bsz)]

    def _finished(self, tokens):
        return (tokens[:, 1:] == self.eos).any(dim=1)

    def _hypothesis(self, row, max_len, iterations):
        body = row[1:]
        eos_at = (body == self.eos).nonzero()
        end = min(int(eos_at[0]) if len(eos_at) else max_len, max_len)
        out = torch.cat([body[:end], body.new_tensor([self.eos])])
        return {"tokens": out, "score": torch.tensor(0.0), "positional_scores": torch.zeros(len(out)),
                "attention": torch.empty(0), "alignment": torch.empty(0), "steps": iterations}


@register_decoder("drafter-only", "the block NAT drafter alone, every drafted block accepted (no verifier)")
def build_drafter_only(task, models, args, **kwargs):
    """With ``--path drafter.pt`` the drafter is models[0]; else ``--drafter-path`` is loaded."""
    options.check_generation_args(args, "drafter-only")
    options.report_as_greedy(args)
    drafter = models[0] if hasattr(models[0], "propose") else load_drafter(task, models[0])
    return DrafterOnlyGenerator(drafter, task.target_dictionary, task.cfg.block_size or drafter.block_size, args)
