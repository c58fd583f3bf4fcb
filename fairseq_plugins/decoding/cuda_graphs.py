"""SpecDec's batch-1 calls on fixed buffers, replayed as CUDA graphs (``--cuda-graphs``).

On a GPU at batch 1 a small pair is launch-bound: the demo drafter's call dispatches ~137 tensor operations and the
verifier's block ~151, 10-13 us each on an H200, whatever their arithmetic. A CUDA
graph replays a whole call as one launch but needs every shape and address fixed, so these run the calls on static
buffers (batch 1; the lean layers of ``decoding.fast_decoder`` unchanged):

drafter (:class:`StaticDrafterStep`)
    block   W = M + Q rows: M = k + 1 slots for the newly accepted tokens (padded; the n_new real ones first),
            then the Q mask queries; every row written at cache slots fed .. fed + W - 1, then fed += n_new
    cache   each layer's keys/values (1, H, CAP, d), CAP = TARGET_SLOTS + W, attended in full under a mask
            computed on the device from ``fed`` and ``n_new`` (stale slots are never seen)
    tables  the queries' embeddings (``drafter_cache.QueryTable``) and the position embeddings up to TARGET_SLOTS,
            the former refilled per sentence into a fixed buffer
    More newly accepted tokens than M (after iterations the draft-length guard left undrafted) are fed in
    chunks of M; one graph serves every call of every sentence.
verifier (:class:`StaticVerifier`, through the generator's ``cache_factory``)
    one graph per block width m (the pending token + up to k drafts), written at slots valid .. valid + m - 1,
    attending up to its own slot; ``rollback`` moves ``valid`` in place.
both    the source's keys/values in (1, H, SOURCE_SLOTS, d) buffers with a mask for its length.

Batches of several rows, sources longer than SOURCE_SLOTS and outputs that may outgrow TARGET_SLOTS run the
ordinary drafter and verifier caches; the drafter also hands over for a prefix within Q tokens of TARGET_SLOTS.
On a CPU (``--cuda-graphs on``) the same static steps run eagerly: slower there (attention over the whole
buffer), which is how the parity tests check them without a GPU.
"""
import logging
from typing import Callable, List, Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from fairseq_plugins.decoding.drafter_cache import QueryTable, count_queries
from fairseq_plugins.decoding.drafters import Draft, Drafter
from fairseq_plugins.decoding.fast_decoder import FastLayer, fast_path_problems, lean_layers
from fairseq_plugins.decoding.incremental import (VerifierCache, decoder_input, decoder_output_states,
                                                   embed_positions_at, output_layer)
from fairseq_plugins.decoding.layer_parts import split_heads
from fairseq_plugins.decoding.linears import float_linear
from fairseq_plugins.models import drafter_blocks
from fairseq_plugins_compat.errors import PluginError

logger = logging.getLogger(__name__)

SOURCE_SLOTS = 128  # the longest source (tokens) the static buffers hold
TARGET_SLOTS = 256  # the longest prefix (tokens, with its EOS) they hold


class StaticDrafterStep:
    """The block drafter's cached proposal for one row on fixed buffers (see the module docstring).

    decoder: a ``BlockDrafterDecoder`` with causal prefix attention (eval mode) whose layers the lean path runs;
    n_new_max: M (Q is its ``block_size``); vocab_limit: > 0 proposes among the first entries only; head: the
    drafter's ``head_drafting.HeadDrafting`` (None: the block's own drafts), run in the step too.
    """

    def __init__(self, decoder, n_new_max: int, vocab_limit: int = 0, head=None):
        self.decoder = decoder
        self.head = head
        self.m, self.q = n_new_max, decoder.block_size
        self.width = self.m + self.q
        weight = decoder.embed_tokens.weight
        self.device = weight.device
        layers = lean_layers(decoder, float_linear)
        if layers is None:
            raise PluginError("--cuda-graphs on: the drafter's layers are not the standard transformer's")
        self.limit = min(TARGET_SLOTS, decoder.max_positions())  # the step's prefix stays within limit - Q tokens
        self.capacity = self.limit + self.width
        self.layers = static_layers(layers, self.capacity, weight)
        self.encoder_visible = torch.zeros(1, 1, 1, SOURCE_SLOTS, dtype=torch.bool, device=self.device)
        self.query_table = weight.new_zeros(1, self.limit, weight.size(1))
        self.position_table = position_table(decoder, self.limit + decoder.padding_idx + 1)
        rows = decoder.output_projection.weight
        self.output_weight = rows[:vocab_limit].contiguous() if vocab_limit else rows
        self.banned = torch.tensor([b for b in decoder.banned if not vocab_limit or b < vocab_limit],
                                   dtype=torch.long, device=self.device)
        self.block_visible = drafter_blocks.block_attention_mask(self.m, self.q, prefix_causal=True, device=self.device)
        self.offsets = torch.arange(self.width, device=self.device)
        self.slot_numbers = torch.arange(self.capacity, device=self.device)
        # the inputs and outputs the graph reads and writes
        self.new_tokens = torch.full((1, self.m), decoder.padding_idx, dtype=torch.long, device=self.device)
        self.fed = torch.zeros(1, dtype=torch.long, device=self.device)
        self.n_new = torch.zeros(1, dtype=torch.long, device=self.device)
        self.logits: Optional[Tensor] = None  # (1, Q, V) float32
        self.drafts: Optional[Tensor] = None  # (1, Q): the head's drafts (with a head)
        self.graph = None

    def start(self, encoder_out):
        """Refill the per-sentence buffers from the verifier's (shared) encoder output, batch 1."""
        fill_source(self.layers, self.encoder_visible, encoder_out)
        queries = QueryTable(self.decoder).embed(1, self.limit, encoder_out)  # (1, limit, C)
        self.query_table.copy_(queries)
        self.fed.zero_()

    def step(self):
        """One proposal on the static buffers: the M new-token slots (``n_new`` real) and the Q queries through
        the layers, the queries' logits into ``self.logits`` (and the head's drafts into ``self.drafts``); ``fed``
        moves on by ``n_new``."""
        decoder = self.decoder
        pad = decoder.padding_idx
        real = self.offsets[:self.m] < self.n_new  # (M,)
        positions = (self.fed + 1 + pad + self.offsets[:self.m]).masked_fill(~real, pad)
        x = decoder.embed_scale * decoder.embed_tokens(self.new_tokens)  # (1, M, C)
        pos = None if self.position_table is None else self.position_table.index_select(0, positions)[None]
        prefix = decoder.finish_embedding(x, pos)
        first = self.fed + self.n_new - 1  # the query predicting the token after the last accepted one
        queries = self.query_table.index_select(1, first + self.offsets[:self.q])  # (1, Q, C)
        x = torch.cat([prefix, queries], dim=1).transpose(0, 1)  # (W, 1, C)
        slots = self.fed + self.offsets  # (W,)
        offset = self.slot_numbers - self.fed  # (CAP,)
        in_block = (offset >= 0) & (offset < self.width)
        index = offset.clamp(0, self.width - 1)
        column_real = torch.cat([real, real.new_ones(self.q)])  # (W,)
        seen = (self.block_visible[:, index] & column_real[index] & in_block) | (offset < 0)  # (W, CAP)
        visible = seen[None, None]

        def write(buffer: Tensor, new: Tensor):
            buffer.index_copy_(2, slots, new)

        for layer in self.layers:
            x = layer.forward(x, write, self.capacity, visible, self.encoder_visible)
        x = decoder_output_states(decoder, x[self.m:])  # the queries' (1, Q, C)
        logits = F.linear(x, self.output_weight).float()
        self.logits = logits.index_fill_(-1, self.banned, float("-inf"))
        if self.head is not None:
            last = self.new_tokens.gather(1, self.n_new.view(1, 1) - 1).view(1)  # the last accepted token
            self.drafts = self.head.draft_on_device(x, self.logits, last)
        self.fed.add_(self.n_new)

    def run(self):
        """``step`` as a CUDA graph (captured on the first call) on a GPU, eagerly elsewhere."""
        if self.device.type != "cuda":
            self.step()
            return
        if self.graph is None:
            saved = self.fed.clone()  # each warm-up step moves fed on; capturing runs nothing
            self.graph, _ = capture(self.step, reset=lambda: self.fed.copy_(saved))
        self.graph.replay()


class GraphedBlockDrafter(Drafter):
    """A ``specdec.BlockDrafter`` (``ordinary``) whose batch-1 proposals run on a :class:`StaticDrafterStep` instead
    (one CUDA graph on a GPU); other batches, and a sentence whose prefix outgrows the static buffers from then on,
    go to ``ordinary``. The drafter must have a causal prefix and read the verifier's encoder output."""

    uses_verifier_encoder = True
    has_prefix_cache = True
    failures_persist = False

    def __init__(self, ordinary: Drafter, block_size: int):
        self.ordinary = ordinary
        self.decoder = ordinary.model.decoder
        self.static = StaticDrafterStep(self.decoder, block_size + 1, ordinary.vocab_limit, ordinary.head)
        self.single = False  # this batch runs on the static step
        self.batch = None
        self.fed = 0  # tokens fed to the static step (host copy of its ``fed``)
        self.static_proposals = 0

    def start(self, batch):
        self.batch = batch
        self.single = batch.src_tokens.size(0) == 1 and batch.src_tokens.size(1) <= SOURCE_SLOTS
        if not self.single:
            return self.ordinary.start(batch)
        self.static.start(batch.encoder_out)
        self.fed = 0

    @torch.no_grad()
    def propose(self, tokens, lengths, k):
        length = int(lengths[0]) if self.single else 0
        if self.single and (length + self.static.q > self.static.limit
                            or count_queries(self.decoder, length, k) != self.static.q):
            self.single = False  # the ordinary cache takes over for the rest of the sentence, fed from its start
            self.ordinary.start(self.batch)
        if not self.single:
            return self.ordinary.propose(tokens, lengths, k)
        static = self.static
        while self.fed < length:
            n_new = min(length - self.fed, static.m)
            static.new_tokens.fill_(self.decoder.padding_idx)
            static.new_tokens[0, :n_new] = tokens[0, self.fed:self.fed + n_new]
            static.n_new.fill_(n_new)
            static.run()
            self.fed += n_new
        self.static_proposals += 1
        if static.head is not None:  # the head's first k drafts are its drafts for k: the walk runs from position 0
            return Draft(static.drafts[:, :k].clone())
        scores = static.logits[:, :k].clone()  # (1, k, V')
        return Draft(scores.argmax(-1), scores)

    def keep_rows(self, rows):
        if not self.single:
            self.ordinary.keep_rows(rows)


class StaticVerifier:
    """The verifier's block pass for one row on fixed buffers, one CUDA graph per block width m (1 .. M): the
    block written at cache slots valid .. valid + m - 1 and attending to every slot up to its own, under a mask
    computed on the device from ``valid`` (which ``rollback`` moves in place); the source as for the drafter.

    model: the verifier (its lean layers); linear: how they run an ``nn.Linear`` (the generator's); m_max: M.
    """

    def __init__(self, model, linear, m_max: int):
        decoder = self.decoder = model.decoder
        layers = lean_layers(decoder, linear)
        if layers is None:
            raise PluginError("--cuda-graphs on: the verifier's layers are not the standard transformer's")
        weight = decoder.embed_tokens.weight
        self.device = weight.device
        self.limit = min(TARGET_SLOTS, decoder.max_positions())
        self.capacity = self.limit + m_max
        self.layers = static_layers(layers, self.capacity, weight)
        self.encoder_visible = torch.zeros(1, 1, 1, SOURCE_SLOTS, dtype=torch.bool, device=self.device)
        self.position_table = position_table(decoder, min(self.capacity, decoder.max_positions()) + decoder.padding_idx + 1)
        self.output = output_layer(decoder, linear)
        self.offsets = torch.arange(m_max, device=self.device)
        self.slot_numbers = torch.arange(self.capacity, device=self.device)
        self.tokens = torch.full((1, m_max), decoder.padding_idx, dtype=torch.long, device=self.device)
        self.valid = torch.zeros(1, dtype=torch.long, device=self.device)
        self.graphs, self.outputs = {}, {}  # m -> CUDAGraph, (lprobs (1, m, V), states (1, m, C))

    def start(self, encoder_out):
        """Refill the source buffers from the encoder output (batch 1); an empty cache."""
        fill_source(self.layers, self.encoder_visible, encoder_out)
        self.valid.zero_()

    def step(self, m: int):
        """The block of the first m ``tokens`` -> log-probs (1, m, V) float32 and last states (1, m, C)."""
        decoder = self.decoder
        slots = self.valid + self.offsets[:m]  # (m,)
        positions = None if self.position_table is None else \
            self.position_table.index_select(0, slots + decoder.padding_idx + 1)[None]
        x = decoder_input(decoder, self.tokens[:, :m], positions)  # (m, 1, C)
        visible = (self.slot_numbers[None, :] <= slots[:, None])[None, None]  # (1, 1, m, CAP)

        def write(buffer: Tensor, new: Tensor):
            buffer.index_copy_(2, slots, new)

        for layer in self.layers:
            x = layer.forward(x, write, self.capacity, visible, self.encoder_visible)
        x = decoder_output_states(decoder, x)
        return F.log_softmax(self.output(x).float(), dim=-1), x

    def run(self, m: int):
        """``step(m)``: replayed from its CUDA graph (captured on first use) on a GPU, eagerly elsewhere."""
        if self.device.type != "cuda":
            return self.step(m)
        if m not in self.graphs:
            self.graphs[m], self.outputs[m] = capture(lambda: self.step(m))
        self.graphs[m].replay()
        return self.outputs[m]


def static_layers(layers, capacity: int, like: Tensor) -> List[FastLayer]:
    """The lean layers for one row on fixed buffers: keys/values (1, H, capacity, d), the source's (1, H, SOURCE_SLOTS, d)."""
    out = [FastLayer(w, 1, like) for w in layers]
    for layer in out:
        heads, head_dim = layer.weights.heads, layer.weights.head_dim
        layer.key, layer.value = like.new_zeros(1, heads, capacity, head_dim), like.new_zeros(1, heads, capacity, head_dim)
        layer.encoder_key = like.new_zeros(1, heads, SOURCE_SLOTS, head_dim)
        layer.encoder_value = like.new_zeros(1, heads, SOURCE_SLOTS, head_dim)
    return out


def position_table(decoder, rows: int) -> Optional[Tensor]:
    """The decoder's position embeddings (rows, C) for fairseq position numbers 0 .. rows - 1, or None."""
    if decoder.embed_positions is None:
        return None
    every = torch.arange(rows, device=decoder.embed_tokens.weight.device)[None, :]
    return embed_positions_at(decoder.embed_positions, every)[0].contiguous()


def fill_source(layers: List[FastLayer], encoder_visible: Tensor, encoder_out):
    """Write the source's keys/values (from encoder_out's states (S, 1, C)) into the layers' fixed buffers and
    mark its S positions (minus any padding) in ``encoder_visible`` (1, 1, 1, SOURCE_SLOTS)."""
    states = encoder_out["encoder_out"][0]
    source_len = states.size(0)
    for layer in layers:
        w = layer.weights
        layer.encoder_key[:, :, :source_len] = split_heads(w.encoder_k(states), w.heads, w.head_dim)
        layer.encoder_value[:, :, :source_len] = split_heads(w.encoder_v(states), w.heads, w.head_dim)
    encoder_visible.zero_()
    encoder_visible[..., :source_len] = True
    padding = encoder_out["encoder_padding_mask"]
    if len(padding) > 0:
        encoder_visible[0, 0, 0, :source_len] &= ~padding[0][0].to(torch.bool)


def capture(step, reset=lambda: None):
    """A CUDA graph of ``step()`` (warmed up first on a side stream, ``reset()`` before each call and after the
    capture, outside the graph) and the outputs its replays write."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):  # cuBLAS workspaces, lazy inits: outside the graph
            reset()
            step()
    torch.cuda.current_stream().wait_stream(stream)
    reset()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = step()
    reset()
    return graph, outputs


class StaticVerifierCache:
    """``incremental.VerifierCache``'s interface for one row, on a :class:`StaticVerifier`."""

    def __init__(self, static: StaticVerifier):
        self.static = static
        self.upper = 0  # >= valid (a host bound, refreshed by a sync only near the limit)

    def steps(self, m: int) -> Tensor:
        return self.static.valid.unsqueeze(1) + self.static.offsets[:m].unsqueeze(0)

    def step_bounds(self, m: int):
        """Host bounds of :meth:`steps` (m): none below, ``upper`` above (no synchronisation)."""
        return 0, self.upper + m - 1

    def forward_block(self, tokens: Tensor):
        static, m = self.static, tokens.size(1)
        if self.upper + m > static.limit:
            self.upper = int(static.valid)
            if self.upper + m > static.limit:
                raise PluginError(f"--cuda-graphs: a prefix beyond the {static.limit} target slots")  # the factory ruled it out
        static.tokens[:, :m] = tokens
        lprobs, states = static.run(m)
        self.upper += m
        return lprobs.clone(), states.clone()

    def rollback(self, kept: Tensor):
        self.static.valid.add_(kept)

    def keep_rows(self, rows: Tensor):
        if rows.numel() > 0:
            raise PluginError("--cuda-graphs: the static verifier cache holds one row")


class GraphedVerifierCaches:
    """The generator's ``cache_factory``: a :class:`StaticVerifierCache` for a batch of one row whose source fits
    SOURCE_SLOTS and whose longest output (``max_len(source length)``, the generator's) fits TARGET_SLOTS with a
    block past it (the :class:`StaticVerifier` built on first use and kept), ``VerifierCache`` otherwise."""

    def __init__(self, m_max: int, max_len: Callable[[int], int]):
        self.m_max = m_max
        self.max_len = max_len
        self.static: Optional[StaticVerifier] = None

    def __call__(self, verifier, encoder_out, batch_size, device, linear=float_linear, built=None):
        source_len = encoder_out["encoder_out"][0].size(0)
        if self.static is None and batch_size == 1:
            self.static = StaticVerifier(verifier, linear, self.m_max)
        if (batch_size != 1 or source_len > SOURCE_SLOTS
                or 1 + self.max_len(source_len) + self.m_max > self.static.limit):
            return VerifierCache(verifier, encoder_out, batch_size, device, linear=linear, built=built)
        self.static.start(encoder_out)
        return StaticVerifierCache(self.static)


def wanted(choice: str, ordinary: Optional[Drafter], verifier) -> bool:
    """Whether ``--cuda-graphs choice`` (auto, on, off) runs this pair's batch-1 calls on the static steps
    (``ordinary``: the pair's drafter; None: ``--decoding greedy``'s verifier alone): auto for a float32 pair on
    CUDA (what has been checked on a GPU) when the pair allows it (a causal-prefix drafter reading the verifier's
    encoder output, standard transformer layers on both sides), on wherever the pair allows it (a one-line error
    otherwise; on a CPU the static steps run eagerly, for checking), off never."""
    param = next(verifier.parameters())
    on_cuda = param.device.type == "cuda"
    if choice == "off" or (choice == "auto" and not (on_cuda and param.dtype == torch.float32)):
        return False
    problems = graph_problems(ordinary, verifier)
    if choice == "auto":
        if problems:
            logger.info(f"--cuda-graphs auto: off, as {problems}")
        return not problems
    if problems:
        raise PluginError(f"--cuda-graphs on: {problems}")
    if not on_cuda:
        logger.info("--cuda-graphs on, on a CPU: the static steps run eagerly (slower; for checking)")
    return True


def graph_problems(ordinary: Optional[Drafter], verifier) -> str:
    """Why the static steps cannot serve this drafter (a ``specdec.BlockDrafter``; None: no drafter) and verifier
    ('' if they can)."""
    problems, decoders = [], [("verifier", verifier.decoder)]
    if ordinary is not None:
        if not ordinary.has_prefix_cache:
            problems.append("the drafter has no prefix cache (trained without --prefix-attention causal)")
        if not ordinary.uses_verifier_encoder:
            problems.append("the drafter runs its own encoder (trained without --share-verifier-encoder)")
        decoders.insert(0, ("drafter", ordinary.model.decoder))
    for role, decoder in decoders:
        unusual = fast_path_problems(decoder)
        if unusual:
            problems.append(f"the {role}'s layers have {', '.join(unusual)}")
    return "; ".join(problems)
