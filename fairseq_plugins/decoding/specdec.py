"""SpecDec / SpecDec++ (GAD / GAD++): a block NAT drafter proposes k tokens, the AT
verifier checks them in one pass.  ``--decoding specdec`` is lossless (beta=1, tau=0);
``--decoding specdec++`` is the paper's high-quality preset (beta=3, tau=1.0), and the
high-efficiency preset is ``--beta 5 --tau 3.0``."""
import logging
from dataclasses import dataclass, field
from typing import Optional

import torch
from fairseq.dataclass import ChoiceEnum

from fairseq_plugins.decoding import cuda_graphs
from fairseq_plugins.decoding.acceptance import is_lossless
from fairseq_plugins.decoding.builder import build_speculative, load_drafter
from fairseq_plugins.decoding.drafters import Draft, Drafter
from fairseq_plugins.decoding.built_once import BuiltOnce
from fairseq_plugins.decoding.linears import (SMALL_WEIGHT, Int8Linears, float32_linears, half_weights_available,
                                              int8_available)
from fairseq_plugins.decoding.options import HEAD_CANDIDATES, DrafterModelOptions, head_candidates
from fairseq_plugins.decoding.registry import register_decoder
from fairseq_plugins.decoding.drafter_cache import DrafterCache, reorder_encoder_out
from fairseq_plugins.decoding.head_drafting import HeadDrafting
from fairseq_plugins.models.sequential_head import head_of
from fairseq_plugins_compat.errors import PluginError

logger = logging.getLogger(__name__)

PRESETS = {"specdec": (1, 0.0), "specdec++": (3, 1.0)}  # name -> (beta, tau)


@dataclass
class SpecDecOptions(DrafterModelOptions):
    beta: Optional[int] = field(
        default=None, metadata={"help": "SpecDec++: a drafted token passes if among the verifier's top-beta "
                                        "(default 1 for specdec, 3 for specdec++)"})
    tau: Optional[float] = field(
        default=None, metadata={"help": "SpecDec++: ... and its log-probability is within tau of the top-1 "
                                        "(default 0 for specdec, 1.0 for specdec++; high-efficiency preset: "
                                        "--beta 5 --tau 3)"})
    draft_vocab_size: Optional[int] = field(
        default=None, metadata={"help": "the drafter proposes among the N most frequent target tokens only (the "
                                        "first N dictionary entries: a cheaper output layer, the same output); 0: "
                                        "all; default: the entries that make up 95%% of the target dictionary's "
                                        "counts (all if it is not sorted by count)",
                                "aliases": ("draft_vocab",)})
    drafter_precision: ChoiceEnum(["auto", "float", "fp16", "int8"]) = field(
        default="auto", metadata={"help": "the drafter's matrix products on a CPU (lossless specdec's output never "
                                          "depends on them): int8: int8 weights and inputs (fbgemm; small weights "
                                          "as fp16); fp16: float16-stored weights, float32 math; float: as loaded; "
                                          "auto (the default): int8 for specdec on an AVX-512 CPU, fp16 on other "
                                          "x86 CPUs, float for specdec++ (whose output depends on its drafts) and "
                                          "on CUDA",
                                  "aliases": ("drafter_dtype",)})
    cuda_graphs: ChoiceEnum(["auto", "on", "off"]) = field(
        default="auto", metadata={"help": "replay each batch-1 drafter call and verifier block as a CUDA graph (one "
                                          "launch instead of ~140; the same output): auto (the default): on for a "
                                          "float32 pair on CUDA whose drafter allows it (trained with "
                                          "--prefix-attention causal and --share-verifier-encoder); on: also with "
                                          "--fp16, and eagerly on a CPU (for checks); off: never. Batches of "
                                          "several rows, sources over 128 tokens and outputs that may pass 256 run "
                                          "without graphs"})


class BlockDrafter(Drafter):
    """Adapts a trained block NAT drafter model to the contract.

    A drafter trained with ``--share-verifier-encoder`` reads the verifier's encoder output
    (the core encodes once); any other runs its own encoder once per batch.  With a causal
    prefix (the default) the drafter's prefix states are cached across iterations
    (``drafter_cache``): each proposal feeds only the newly accepted tokens and the
    queries.  ``propose`` returns the drafted tokens with the drafter's scores (``Draft.lprobs``), or, for a
    drafter with a sequential head (``models.sequential_head``, run by ``head_drafting``; ``head_candidates`` > 0),
    the head's drafts among the block's ``head_candidates`` best tokens at each position, without scores.

    Its drafts fail independently of the last one, so ``--draft-length measured`` drafts the
    whole block (with the demo pair, full blocks were faster than blocks shrunk after a rejection)."""

    failures_persist = False

    def __init__(self, model, cached: bool = True, vocab_limit: int = 0, linear=None,
                 head_candidates: int = HEAD_CANDIDATES):
        self.model = model
        self.vocab_limit = vocab_limit
        self.linear = linear  # how the cached drafter runs an nn.Linear (``drafter_linear``'s; None: as loaded)
        self.built = BuiltOnce()  # the drafter cache's lean layers, reused from batch to batch
        model.eval()
        self.encoder_out = None
        self.cache = None
        self.batch = self.rows = None  # a batch not prepared yet, and its rows left (None: all)
        self.prepared_before = False
        self.cached = cached and getattr(model.decoder, "prefix_causal", False)
        self.uses_verifier_encoder = bool(getattr(getattr(model, "args", None), "share_verifier_encoder", False))
        with_head = head_of(model.decoder) is not None and head_candidates > 0
        self.head = HeadDrafting(model.decoder, vocab_limit, head_candidates, linear) if with_head else None

    @property
    def has_prefix_cache(self) -> bool:
        return self.cached

    def start(self, batch):
        src_tokens = batch.src_tokens
        max_source = self.model.max_positions()[0] if isinstance(self.model.max_positions(), tuple) else None
        if max_source is not None and src_tokens.size(1) > max_source:
            raise PluginError(f"input of {src_tokens.size(1)} tokens is longer than the drafter's max source positions ({max_source})")
        self.batch, self.rows = batch, None  # encoded at the first proposal (``_prepare``)
        self.encoder_out = self.cache = None
        if not self.prepared_before:  # the drafter's lean layers and products are built now, not in a timed iteration
            self._prepare()

    def _prepare(self):
        """The batch's encoder output and drafter cache, made at its first proposal for the rows left
        (``self.rows``, None: all): in a batch where ``--draft-length measured`` never drafts, the
        drafter costs nothing.  The whole batch is encoded, then its rows kept, as when made at once.
        The first batch prepares in ``start``: building the lean layers and packing the products
        (~0.15 s for the demo drafter) is a one-off cost, not what drafting costs an iteration."""
        self.prepared_before = True
        batch, rows = self.batch, self.rows
        self.batch = self.rows = None
        if self.uses_verifier_encoder and batch.encoder_out is not None:
            encoder_out = batch.encoder_out
        else:
            encoder_out = self.model.encoder(batch.src_tokens, src_lengths=batch.src_lengths)
        if rows is not None:
            encoder_out = reorder_encoder_out(encoder_out, rows)
        self.encoder_out = encoder_out
        if self.cached:
            size = batch.src_tokens.size(0) if rows is None else rows.numel()
            self.cache = DrafterCache(self.model.decoder, encoder_out, size, self.vocab_limit,
                                      linear=self.linear, built=self.built, check_prefix=False)  # the core's are final

    @torch.no_grad()
    def propose(self, tokens, lengths, k):
        if self.batch is not None:
            self._prepare()
        if self.cache is not None:
            states, scores = self.cache.propose_states_and_logits(tokens, lengths, k)
        else:
            decoder = self.model.decoder
            states = decoder.propose_states(self.encoder_out, tokens[:, : int(lengths.max())], lengths, k)
            scores = decoder.propose_logits(states)
            if self.vocab_limit:
                scores = scores[..., : self.vocab_limit]
        if self.head is None:
            return Draft(scores.argmax(-1), scores)
        last = tokens.gather(1, (lengths - 1)[:, None]).squeeze(1)
        return Draft(self.head.draft(states, scores, last))  # the block's scores are not the head's

    def keep_rows(self, rows):
        if self.batch is not None:  # not prepared yet: remember which rows are left
            self.rows = rows if self.rows is None else self.rows.index_select(0, rows)
        elif self.cache is not None:  # the cache reorders its own encoder output
            self.cache.keep_rows(rows)
        else:
            self.encoder_out = reorder_encoder_out(self.encoder_out, rows)  # its own, or the verifier's


# the default draft vocabulary covers this share of the dictionary's counts (the demo pair's: 3,456 of 8,008 entries;
# on Multi30k valid 4,000 entries drafted as many tokens per iteration as all 8,008, at less drafter cost)
DRAFT_VOCAB_COVERAGE = 0.95


def frequent_entries(dictionary, coverage: float = DRAFT_VOCAB_COVERAGE) -> int:
    """The fewest first entries of a fairseq dictionary whose counts make up ``coverage`` of
    the counts of the ordinary entries (the N returned include the special symbols); 0 (the
    whole vocabulary) when the ordinary entries are not sorted by count, or have no counts."""
    counts = [int(c) for c in dictionary.count]
    ordinary = counts[dictionary.nspecial:]
    total = sum(ordinary)
    if total <= 0 or any(a < b for a, b in zip(ordinary, ordinary[1:])):
        return 0
    covered = 0
    for n, count in enumerate(ordinary, start=1):
        covered += count
        if covered >= coverage * total:
            return dictionary.nspecial + n
    return len(counts)


def auto_drafter_precision(lossless_cpu: bool, float_cache: bool) -> str:
    """``--drafter-precision auto``: for lossless specdec with a CPU drafter cache, int8 on an AVX-512 CPU (or
    where fbgemm has no float16 product) and fp16 on the others; float otherwise (specdec++, whose output depends
    on its drafts; CUDA).  Trained Multi30k pairs on a 2-core AVX-512 Xeon, one thread: the Transformer-base pair's
    drafter costs 0.24 instead of 0.31 stock greedy steps an iteration in int8, the demo pair's the same; on a
    2-core AVX2 EPYC int8 was the slower (the demo pair)."""
    if not lossless_cpu:
        return "float"
    half = float_cache and half_weights_available()
    if int8_available() and (not half or torch.backends.cpu.get_cpu_capability() == "AVX512"):
        return "int8"
    return "fp16" if half else "float"


def drafter_linear(opts, name: str, drafter):
    """How the drafter cache runs an nn.Linear (``--drafter-precision``): ``Int8Linears`` (int8; its small
    weights as fp16), ``HalfWeightLinears`` rounding its weights to float16 (fp16), or for float, on a CPU
    with a float32 cache, ``HalfWeightLinears`` for weights that are float16 numbers and ``PackedLinears``
    for the others; None (as loaded) otherwise."""
    precision = opts.drafter_precision
    param = next(drafter.parameters())
    on_cpu = param.device.type == "cpu"
    cached = getattr(drafter.decoder, "prefix_causal", False)
    float_cache = cached and on_cpu and param.dtype == torch.float32
    if precision == "auto":
        precision = auto_drafter_precision(name == "specdec" and on_cpu and cached, float_cache)
    elif precision in ("int8", "fp16") and not on_cpu:
        raise PluginError(f"--drafter-precision {precision} runs on CPU only (fbgemm); use float on CUDA")
    elif precision == "int8" and not int8_available():
        raise PluginError("--drafter-precision int8: this PyTorch has no fbgemm/x86 int8 kernels; use float")
    elif precision == "fp16" and not half_weights_available():
        raise PluginError("--drafter-precision fp16: this PyTorch has no fbgemm float16 kernels; use float")
    elif precision == "int8" and not cached:
        raise PluginError("--drafter-precision int8 needs the drafter cache (a drafter trained with "
                          "--prefix-attention causal); use float")
    elif precision == "fp16" and not float_cache:
        raise PluginError("--drafter-precision fp16 needs the drafter cache (a drafter trained with "
                          "--prefix-attention causal) in float32; use float")
    if precision == "int8":
        small = "stored as float16 (rounded), in float32 arithmetic" if half_weights_available() else "in float32"
        logger.info(f"{name}: the drafter's matrix products run in int8, its weights under {SMALL_WEIGHT} elements "
                    f"{small} (--drafter-precision float: as loaded)")
        return Int8Linears(fallback=float32_linears(round_weights=True))
    if not float_cache:
        return None
    if precision == "fp16":
        logger.info(f"{name}: the drafter's products read its weights stored as float16 (rounded where they are not "
                    "float16 numbers), in float32 arithmetic (--drafter-precision float: as loaded)")
    return float32_linears(round_weights=precision == "fp16")


def specdec_settings(task, models, opts, name: str, preset: str):
    """What a SpecDec-family builder reads from ``opts`` for ``--decoding name``: the drafter model (checked
    against the verifier), beta and tau (``PRESETS[preset]`` unless given), k, and the draft vocabulary's size
    (``--draft-vocab-size``, checked; default :func:`frequent_entries`)."""
    drafter = load_drafter(task, models[0], opts.drafter_path, name, opts.block_size)
    beta, tau = PRESETS[preset]
    beta = opts.beta if opts.beta is not None else beta
    tau = opts.tau if opts.tau is not None else tau
    block_size = opts.block_size or drafter.block_size
    dictionary = task.target_dictionary
    vocab_limit = opts.draft_vocab_size if opts.draft_vocab_size is not None else frequent_entries(dictionary)
    if vocab_limit < 0 or vocab_limit > len(dictionary):
        raise PluginError(f"--draft-vocab-size must be between 0 and the vocabulary size {len(dictionary)}, "
                          f"got {vocab_limit}")
    banned = set(getattr(drafter.decoder, "banned", ()))
    first_draftable = next(i for i in range(len(dictionary)) if i not in banned)
    if 0 < vocab_limit <= first_draftable:
        raise PluginError(f"--draft-vocab-size {vocab_limit} leaves the drafter no token to propose (its first "
                          f"entries are symbols it never drafts): at least {first_draftable + 1}, or 0 for all")
    if opts.draft_vocab_size is None and vocab_limit:
        logger.info(f"{name}: the drafter proposes among the {vocab_limit} most frequent of {len(dictionary)} "
                    f"tokens ({DRAFT_VOCAB_COVERAGE:.0%} of the dictionary's counts; --draft-vocab-size 0: all)")
    return drafter, beta, tau, block_size, vocab_limit


def _build_specdec(name):
    def build(task, models, args, opts):
        drafter, beta, tau, block_size, vocab_limit = specdec_settings(task, models, opts, name, name)
        adapter = BlockDrafter(drafter, vocab_limit=vocab_limit, linear=drafter_linear(opts, name, drafter),
                               head_candidates=head_candidates(opts.head_candidates, is_lossless(beta, tau)))
        graphs = cuda_graphs.wanted(str(opts.cuda_graphs), adapter, models[0])
        if graphs:
            adapter = cuda_graphs.GraphedBlockDrafter(adapter, block_size)
        generator = build_speculative(task, models, args, name, adapter, opts, block_size, beta, tau)
        if graphs:
            generator.cache_factory = cuda_graphs.GraphedVerifierCaches(block_size + 1, generator.max_len)
        return generator

    return build


register_decoder("specdec", "SpecDec: block NAT drafter + AT verifier, the output of --beam 1", SpecDecOptions,
                 needs_drafter=True)(_build_specdec("specdec"))
register_decoder("specdec++", "SpecDec++: top-beta/tau relaxed acceptance (default beta=3, tau=1.0)", SpecDecOptions,
                 needs_drafter=True, greedy_equivalent=False,
                 benchmark_presets=("specdec++:beta=5,tau=3",))(_build_specdec("specdec++"))
