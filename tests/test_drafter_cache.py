"""The drafter's prefix KV cache proposes exactly what the uncached drafter proposes.

Random tiny drafters (double precision, weights scaled up so that attention is peaked
and a wrong mask or position shows; both paths round the logits to float32), random
sources, and random decoding loops: rows gain a ragged number of accepted tokens per
iteration and finished rows leave.
"""
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drafter_helpers import build_drafter, make_dictionary, random_batch
from fairseq_plugins.decoding.linears import PackedLinears, packed_available
from fairseq_plugins.decoding.drafter_cache import DrafterCache
from fairseq_plugins_compat.errors import PluginError

DICT = make_dictionary(20)


def sharp_drafter(seed, dtype=torch.float64, **options):
    """A tiny drafter with N(0, 1/sqrt(fan_in)) weights (BERT init is nearly uniform)."""
    model = build_drafter(DICT, seed=seed, **options)
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() > 1:
                param.normal_(0, param.size(-1) ** -0.5)
    return model.to(dtype)


class Loop:
    """A batch of accepted prefixes that grow like the speculative loop's."""

    def __init__(self, model, src_lengths, seed, width=64):
        self.model, self.g = model, torch.Generator().manual_seed(seed)
        src, src_lengths, _, _ = random_batch(DICT, src_lengths, [1] * len(src_lengths), seed=seed)
        self.encoder_out = model.encoder(src, src_lengths=src_lengths)
        self.rows = torch.arange(src.size(0))  # original index of each active row
        self.tokens = torch.full((src.size(0), width), DICT.pad())
        self.tokens[:, 0] = DICT.eos()
        self.lengths = torch.ones(src.size(0), dtype=torch.long)

    def uncached(self, k):
        encoder_out = self.model.encoder.reorder_encoder_out(self.encoder_out, self.rows)
        prefix = self.tokens[:, : int(self.lengths.max())]
        return self.model.decoder.propose_log_probs(encoder_out, prefix, self.lengths, k)

    def grow(self, gains):
        """Row i accepts ``gains[i]`` more random (non-special) tokens."""
        for i, n in enumerate(gains):
            length = int(self.lengths[i])
            self.tokens[i, length:length + n] = torch.randint(DICT.nspecial, len(DICT), (n,), generator=self.g)
            self.lengths[i] += n

    def accept(self, k, max_length):
        """Every row gains 0 .. k+1 tokens (never past ``max_length``)."""
        gains = torch.randint(0, k + 2, (self.lengths.size(0),), generator=self.g)
        self.grow(torch.minimum(gains, max_length - self.lengths).tolist())

    def finish_some(self):
        """Random rows leave the batch; returns the kept row indices, or None if all stay."""
        done = torch.rand(self.rows.size(0), generator=self.g) < 0.15
        if not bool(done.any()):
            return None
        keep = (~done).nonzero().squeeze(1)
        keep = keep[torch.randperm(keep.numel(), generator=self.g)]  # any order, not only the loop's
        self.rows, self.tokens, self.lengths = self.rows[keep], self.tokens[keep], self.lengths[keep]
        return keep

    def next_k(self):
        """A random k the drafter can still propose (0 when the position table is full)."""
        decoder = self.model.decoder
        room = min(decoder.block_size, decoder.max_positions() - int(self.lengths.max()))
        return int(torch.randint(1, room + 1, (1,), generator=self.g)) if room >= 1 else 0


def run_loop(model, src_lengths, seed, iterations, atol, fast=True, linear=None):
    loop = Loop(model, src_lengths, seed)
    cache = DrafterCache(model.decoder, loop.encoder_out, len(src_lengths), fast=fast, linear=linear)
    assert (cache.layers is not None) == fast  # the lean layers (fast_decoder.py) or fairseq's
    for _ in range(iterations):
        if loop.rows.numel() == 0:
            return
        k = loop.next_k()
        if k == 0:
            return
        expected = loop.uncached(k)
        got = cache.propose_log_probs(loop.tokens, loop.lengths, k)
        assert got.dtype == torch.float32 and got.shape == expected.shape
        assert torch.equal(got.isinf(), expected.isinf())
        torch.testing.assert_close(got, expected, atol=atol, rtol=0)
        assert torch.equal(got.argmax(-1), expected.argmax(-1))
        loop.accept(k, model.decoder.max_positions())
        keep = loop.finish_some()
        if keep is not None:  # as the decoding loop does: only when rows finish
            cache.keep_rows(keep)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    src_lengths=st.lists(st.integers(1, 10), min_size=1, max_size=5),
    block_size=st.integers(1, 6),
    learned_pos=st.booleans(),
    soft_copy=st.booleans(),
    layernorm_embedding=st.booleans(),
    normalize_before=st.booleans(),
    project_dims=st.booleans(),
    table_room=st.integers(1, 40),
    fast=st.booleans(),
)
def test_cached_proposals_equal_uncached(seed, src_lengths, block_size, learned_pos, soft_copy, layernorm_embedding,
                                         normalize_before, project_dims, table_room, fast):
    dims = dict(encoder_embed_dim=16, decoder_input_dim=16, decoder_output_dim=16) if project_dims else {}
    model = sharp_drafter(
        seed % 50, block_size=block_size, decoder_learned_pos=learned_pos, encoder_learned_pos=learned_pos,
        soft_copy=soft_copy, layernorm_embedding=layernorm_embedding, decoder_normalize_before=normalize_before,
        max_target_positions=block_size + table_room, **dims,
    )
    run_loop(model, src_lengths, seed, iterations=12, atol=2e-6, fast=fast)


@pytest.mark.parametrize("fast", [True, False])
def test_float32_preset_drafter_matches_within_1e_5(fast):
    model = sharp_drafter(3, dtype=torch.float32, block_size=10)
    run_loop(model, [9, 4, 12, 7], seed=5, iterations=10, atol=1e-5, fast=fast)


@pytest.mark.skipif(not packed_available(), reason="no oneDNN packed linear")
def test_float32_drafter_with_packed_weights_matches_within_1e_5():
    """``--drafter-precision float`` on a CPU: the cache's products with oneDNN-packed weights."""
    model = sharp_drafter(3, dtype=torch.float32, block_size=10)
    run_loop(model, [9, 4, 12, 7], seed=5, iterations=10, atol=1e-5, linear=PackedLinears())


@pytest.mark.parametrize("fast", [True, False])
def test_only_new_prefix_tokens_and_queries_are_fed(fast):
    model = sharp_drafter(0, block_size=4)
    fed = []
    loop = Loop(model, [5, 3], seed=0)
    cache = DrafterCache(model.decoder, loop.encoder_out, 2, fast=fast)
    if fast:
        forward = cache.layers.forward
        cache.layers.forward = lambda x, *args, **kwargs: fed.append(x.size(0)) or forward(x, *args, **kwargs)
    else:
        model.decoder.layers[0].register_forward_pre_hook(lambda module, args: fed.append(args[0].size(0)))
    cache.propose_log_probs(loop.tokens, loop.lengths, 2)
    loop.grow([3, 1])
    cache.propose_log_probs(loop.tokens, loop.lengths, 2)
    loop.grow([1, 2])
    cache.propose_log_probs(loop.tokens, loop.lengths, 2)
    assert fed == [1 + 4, 3 + 4, 2 + 4]  # longest new part of a row + the 4 queries


def test_the_last_layer_runs_the_prefix_tokens_for_keys_and_values_only():
    """The new prefix tokens' output of the last layer is read by nobody: their keys and values are cached, the
    rest of that layer runs for the queries alone, and the proposals equal the uncached drafter's."""
    model = sharp_drafter(0, block_size=4)
    loop = Loop(model, [5, 3], seed=0)
    cache = DrafterCache(model.decoder, loop.encoder_out, 2, fast=True)
    last = cache.layers.layers[-1]
    rows = []
    forward = last.forward

    def counting_forward(x, *args):
        out = forward(x, *args)
        rows.append((x.size(0), out.size(0)))
        return out
    last.forward = counting_forward
    loop.grow([3, 1])
    cached = cache.propose_log_probs(loop.tokens, loop.lengths, 4)
    assert rows == [(4 + 4, 4)]  # in: the longest row's 4 prefix tokens (eos + 3) and the 4 queries; out: the queries
    torch.testing.assert_close(cached, loop.uncached(4), atol=2e-6, rtol=0)


def test_bidirectional_prefix_is_refused():
    model = sharp_drafter(0, prefix_attention="bidirectional")
    loop = Loop(model, [4], seed=0)
    with pytest.raises(PluginError, match="bidirectional"):
        DrafterCache(model.decoder, loop.encoder_out, 1)


def test_changed_accepted_token_is_refused():
    model = sharp_drafter(0)
    loop = Loop(model, [4, 6], seed=0)
    cache = DrafterCache(model.decoder, loop.encoder_out, 2)
    loop.grow([2, 2])
    cache.propose_log_probs(loop.tokens, loop.lengths, 2)
    loop.grow([1, 1])
    loop.tokens[1, 2] = DICT.nspecial + 1 if int(loop.tokens[1, 2]) != DICT.nspecial + 1 else DICT.nspecial
    with pytest.raises(PluginError, match="changed"):
        cache.propose_log_probs(loop.tokens, loop.lengths, 2)


def test_unchecked_cache_trusts_the_callers_prefix():
    """check_prefix=False (the speculative core's drafter, whose accepted tokens are final) skips the comparison:
    a changed cached token is not refused, and the row count is still checked."""
    model = sharp_drafter(0)
    loop = Loop(model, [4, 6], seed=0)
    cache = DrafterCache(model.decoder, loop.encoder_out, 2, check_prefix=False)
    loop.grow([2, 2])
    cache.propose_log_probs(loop.tokens, loop.lengths, 2)
    loop.grow([1, 1])
    loop.tokens[1, 2] = DICT.nspecial + 1 if int(loop.tokens[1, 2]) != DICT.nspecial + 1 else DICT.nspecial
    assert cache.propose_log_probs(loop.tokens, loop.lengths, 2).shape[:2] == (2, 2)
    with pytest.raises(PluginError, match="holds 2 rows"):
        cache.propose_log_probs(loop.tokens[:1], loop.lengths[:1], 2)


def test_past_the_position_table_is_refused_like_uncached():
    model = sharp_drafter(0, block_size=4, max_target_positions=8)
    loop = Loop(model, [4], seed=0)
    cache = DrafterCache(model.decoder, loop.encoder_out, 1)
    loop.grow([5])  # 6 tokens + 3 drafted > 8 positions
    with pytest.raises(PluginError):
        loop.uncached(3)
    with pytest.raises(PluginError, match="exceeds"):
        cache.propose_log_probs(loop.tokens, loop.lengths, 3)
    with pytest.raises(PluginError, match="block size"):
        cache.propose_log_probs(loop.tokens, loop.lengths, 5)
