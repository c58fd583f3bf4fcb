"""fairseq-facing generators: ``generate(models, sample)`` -> per sentence a list of
hypothesis dicts (``tokens`` in natural order ending with eos, ``score``,
``positional_scores``, ``attention=None``, ``alignment=None``, ``steps``).

- :class:`DoubleTokenGenerator`: greedy (``--beam 1``) or Algorithm 1 (``--beam W``, stopping
  after ``--nbest`` or W finished hypotheses: ``--pair-beam-stop``) over pairs, for the
  two-tokens-per-step orders.
- :class:`ReorderingGenerator`: fairseq's own search for ``single_r2l``, hypotheses reversed back.
- :class:`PackedLinearsGenerator`: any of them (or fairseq's own) with the models' linear
  layers packed for the CPU (``--packed-linears``).
"""
import torch

from fairseq_plugins.decoding.linears import PackedLinears, packed_linears
from fairseq_plugins.double_token.dataset import start_tokens
from fairseq_plugins.double_token.reorder import TOKENS_PER_STEP, natural_indices
from fairseq_plugins.double_token.search import SearchConfig, beam_search, greedy_search
from fairseq_plugins_compat.errors import PluginError

PAIR_BEAM_STOPS = ["nbest", "beam"]  # Algorithm 1 stops after --nbest / after --beam finished hypotheses
PACKED_LINEARS = ["auto", "off"]  # --packed-linears


def _option(args, name, default):
    """``args.name``, or ``default`` where it is missing or None (args: GenerationConfig or Namespace)."""
    value = getattr(args, name, None)
    return default if value is None else value


def _problems(models, args, extra_kwargs):
    """Generation options the pair search does not implement (empty list: all fine)."""
    get = lambda name, default: _option(args, name, default)  # noqa: E731
    checks = [
        (len(models) != 1, "an ensemble (give one --path)"),
        (get("sampling", False), "--sampling"),
        (get("diverse_beam_groups", -1) > 0, "--diverse-beam-groups"),
        (get("diversity_rate", -1) > -1, "--diversity-rate"),
        (get("match_source_len", False), "--match-source-len"),
        (get("no_repeat_ngram_size", 0) > 0, "--no-repeat-ngram-size"),
        (get("min_len", 1) > 1, "--min-len"),
        (get("unkpen", 0) != 0, "--unkpen"),
        (get("temperature", 1.0) != 1.0, "--temperature"),
        ((extra_kwargs or {}).get("lm_model") is not None, "--lm-path"),
        (get("nbest", 1) > get("beam", 5), "--nbest larger than --beam"),
    ]
    return [name for bad, name in checks if bad]


def check_generation_args(models, args, order, extra_kwargs=None):
    """Raise one PluginError naming every option that does not fit ``--target-order``."""
    if order == "single_l2r":
        return
    get = lambda name, default: _option(args, name, default)  # noqa: E731
    problems = [name for bad, name in [
        (get("score_reference", False), "--score-reference"),
        (get("print_alignment", False), "--print-alignment"),
        (get("prefix_size", 0) > 0, "--prefix-size"),
        (get("constraints", False), "--constraints"),
        (get("prefix_allowed_tokens_fn", None) is not None, "prefix_allowed_tokens_fn"),
    ] if bad]
    if TOKENS_PER_STEP[order] == 2:
        problems += _problems(models, args, extra_kwargs)
    if problems:
        raise PluginError(f"--target-order {order} does not support: {', '.join(problems)}")


def restore_hypothesis(tokens, scores, order, eos):
    """Decoding-order tokens/log-probs (ending with EOD) -> natural tokens + eos and
    positional scores (eos carries the EOD log-probs). Returns two lists."""
    index, eod_index = natural_indices(tokens, order, eos)
    return [tokens[i] for i in index] + [eos], [scores[i] for i in index] + [sum(scores[i] for i in eod_index)]


class ModelStepper:
    """The search's view of a double-token model: one encoder pass, a decoder cache."""

    def __init__(self, model, net_input, rows):
        self.model = model
        encoder_out = model.encoder.forward_torchscript(net_input)
        self.encoder_out = model.encoder.reorder_encoder_out(encoder_out, rows)
        self.state = {}  # fairseq incremental_state: every layer's keys/values

    def step(self, tokens):
        """tokens ``(N, T)`` -> log-probs ``(N, 2, V)`` of the next pair."""
        net_output = self.model.decoder(tokens, encoder_out=self.encoder_out, incremental_state=self.state)
        return self.model.get_normalized_probs(net_output, log_probs=True)

    def reorder(self, rows):
        self.model.decoder.reorder_incremental_state_scripting(self.state, rows)
        self.encoder_out = self.model.encoder.reorder_encoder_out(self.encoder_out, rows)


class DoubleTokenGenerator:
    """Greedy (beam 1) or Algorithm 1 pair search of one double-token model."""

    def __init__(self, model, tgt_dict, order, args, stop="beam"):
        self.model = model
        model.eval()
        self.tgt_dict = tgt_dict
        self.order = order
        self.eos = tgt_dict.eos()
        self.symbols_to_strip_from_output = {tgt_dict.eos(), tgt_dict.bos()}
        self.beam = int(_option(args, "beam", 5))
        self.nbest = int(_option(args, "nbest", 1))
        if stop not in PAIR_BEAM_STOPS:
            raise PluginError(f"--pair-beam-stop must be one of {', '.join(PAIR_BEAM_STOPS)}, not {stop!r}")
        self.stop_after = self.beam if stop == "beam" else self.nbest
        self.lenpen = 0.0 if _option(args, "unnormalized", False) else float(_option(args, "lenpen", 1.0))
        self.max_len_a = float(_option(args, "max_len_a", 0))
        self.max_len_b = int(_option(args, "max_len_b", 200))

    def search_config(self, src_len):
        """Natural length <= min(a * src_len + b, max positions - 1), as fairseq's generator."""
        max_len = min(int(self.max_len_a * src_len + self.max_len_b), self.model.max_decoder_positions() - 1)
        banned = (self.tgt_dict.pad(), self.tgt_dict.bos())
        return SearchConfig(eod=self.eos, max_steps=max_len // 2 + 1, banned=banned,
                            beam=self.beam, nbest=self.nbest, stop_after=self.stop_after, lenpen=self.lenpen)

    @torch.no_grad()
    def generate(self, models, sample, prefix_tokens=None, constraints=None, **kwargs):
        if prefix_tokens is not None or constraints is not None:
            raise PluginError("double-token decoding does not support prefix tokens or constraints")
        src_tokens = sample["net_input"]["src_tokens"]
        bsz, src_len = src_tokens.shape
        cfg = self.search_config(src_len)
        start = src_tokens.new_tensor(start_tokens(self.tgt_dict, self.order))
        rows = torch.arange(bsz, device=src_tokens.device).repeat_interleave(self.beam)
        stepper = ModelStepper(self.model, sample["net_input"], rows)
        search = greedy_search if self.beam == 1 else beam_search
        return [[self._hypothesis(f) for f in found] or [self._empty()] for found in search(stepper, start, bsz, cfg)]

    def _hypothesis(self, finished):
        tokens, scores = restore_hypothesis(finished.tokens, finished.scores, self.order, self.eos)
        return {
            "tokens": torch.tensor(tokens, dtype=torch.long),
            "score": torch.tensor(finished.score),
            "positional_scores": torch.tensor(scores),
            "attention": None,
            "alignment": None,
            "steps": finished.steps,
        }

    def _empty(self):
        """Only when every candidate was -inf: an empty sentence, so callers get one hypothesis."""
        return {"tokens": torch.tensor([self.eos]), "score": torch.tensor(float("-inf")),
                "positional_scores": torch.tensor([float("-inf")]), "attention": None, "alignment": None, "steps": 0}


class ReorderingGenerator:
    """Wraps fairseq's generator for a one-token-per-step order that is not L2R."""

    def __init__(self, generator, tgt_dict, order):
        self.generator = generator
        self.order = order
        self.eos = tgt_dict.eos()
        self.symbols_to_strip_from_output = getattr(generator, "symbols_to_strip_from_output", None) or {self.eos}

    def generate(self, models, sample, **kwargs):
        return [[self._restore(h) for h in hypos] for hypos in self.generator.generate(models, sample, **kwargs)]

    def _restore(self, hypo):
        tokens = hypo["tokens"].tolist()
        index, eod_index = natural_indices(tokens, self.order, self.eos)
        order = torch.tensor(index + eod_index[:1], dtype=torch.long)
        restored = dict(hypo)
        restored["tokens"] = hypo["tokens"][order.to(hypo["tokens"].device)]
        restored["positional_scores"] = hypo["positional_scores"][order.to(hypo["positional_scores"].device)]
        if hypo.get("attention") is not None and hypo["attention"].numel():
            restored["attention"] = hypo["attention"][:, order.to(hypo["attention"].device)]
        return restored


class PackedLinearsGenerator:
    """Runs a generator with the models' float32 linear layers packed for the CPU
    (``linears.packed_linears``): on a few rows at a time (a beam, a token pair) PyTorch's
    ``F.linear`` re-arranges the whole weight on every call, which cost the two-tokens-per-step
    greedy search a third of its speed on a CPU.  One-row products (greedy
    one token per step) are unchanged; others can differ from ``F.linear``'s in the last bits.
    Every other attribute is the wrapped generator's.

    Weights are packed once, for inference.  ``repack`` (the validation generator of a training
    run) packs them afresh on every ``generate``: an optimizer updates a weight through
    ``.data``, which leaves the version stamp that ``PackedLinears`` checks unchanged."""

    def __init__(self, generator, models):
        self.generator = generator
        self.models = list(models)
        self.repack = False
        self.linears = PackedLinears()

    def __getattr__(self, name):
        return getattr(self.generator, name)

    def generate(self, models, sample, **kwargs):
        if self.repack:
            self.linears = PackedLinears()
        with packed_linears(self.models, self.linears):
            return self.generator.generate(models, sample, **kwargs)
