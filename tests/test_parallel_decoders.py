"""IAD and the Jacobi family on the speculative core: greedy parity, iteration counts."""
import pytest
import torch
from fairseq.sequence_generator import SequenceGenerator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairseq_plugins.decoding.core import SpeculativeConfig, SpeculativeGenerator
from fairseq_plugins.decoding.iad import BOS, SourceCopyDrafter, unique_suffix_continuation
from fairseq_plugins.decoding.jacobi import JacobiDrafter
from tiny_models import build_transformer, make_batch, make_dictionary

DICT = make_dictionary(12)
PAD, EOS = DICT.pad(), DICT.eos()


def greedy(model, batch, max_len_b=16):
    return SequenceGenerator([model], DICT, beam_size=1, max_len_b=max_len_b).generate([model], batch)


def decode(model, batch, drafter, block_size, max_len_b=16, adaptive=False):
    cfg = SpeculativeConfig(block_size=block_size, max_len_b=max_len_b, adaptive=adaptive)
    return SpeculativeGenerator(model, DICT, drafter, cfg).generate([model], batch)


def assert_parity(reference, ours):
    for ref, out in zip(reference, ours):
        assert out[0]["tokens"].tolist() == ref[0]["tokens"].tolist()
        torch.testing.assert_close(out[0]["positional_scores"], ref[0]["positional_scores"])
        assert out[0]["steps"] <= len(ref[0]["tokens"])


def test_unique_suffix_continuation():
    source = [BOS, 5, 6, 7, 5, 8, EOS]
    assert unique_suffix_continuation([BOS], source, 1, 10) == [5, 6, 7, 5, 8, EOS]
    assert unique_suffix_continuation([BOS, 6], source, 1, 2) == [7, 5]
    assert unique_suffix_continuation([BOS, 5], source, 1, 10) == []  # 5 occurs twice
    assert unique_suffix_continuation([BOS, 7, 5], source, 2, 10) == [8, EOS]  # "7 5" is unique
    assert unique_suffix_continuation([BOS, 9], source, 1, 10) == []  # nothing in common


DECODERS = {
    "iad": lambda b: SourceCopyDrafter(PAD, match_length=1),
    "iad-2": lambda b: SourceCopyDrafter(PAD, match_length=2),
    "jacobi": lambda b: JacobiDrafter(PAD, PAD, block=None),
    "gs-jacobi": lambda b: JacobiDrafter(PAD, PAD, block=b),
    "hybrid-jacobi": lambda b: JacobiDrafter(PAD, PAD, block=b, hybrid_length=5),
    "jacobi-unk-init": lambda b: JacobiDrafter(DICT.unk(), PAD, block=b),
}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 1000), src_lengths=st.lists(st.integers(1, 10), min_size=1, max_size=4),
       block=st.sampled_from([1, 2, 3, 5]), name=st.sampled_from(sorted(DECODERS)), eos_boost=st.sampled_from([0.0, 1.5]),
       adaptive=st.booleans())
def test_parallel_decoders_give_greedy_output(seed, src_lengths, block, name, eos_boost, adaptive):
    model = build_transformer(DICT, seed=seed % 40, eos_boost=eos_boost, learned_pos=seed % 2 == 0)
    batch = make_batch(DICT, src_lengths, seed=seed)
    block_size = 64 if name.startswith(("iad", "jacobi")) and name != "jacobi-unk-init" else block
    assert_parity(greedy(model, batch), decode(model, batch, DECODERS[name](block), block_size, adaptive=adaptive))


@pytest.mark.parametrize("hybrid_length", [0])
def test_hybrid_jacobi_with_h0_takes_greedy_steps(hybrid_length):
    model = build_transformer(DICT, seed=2, eos_boost=1.0)
    batch = make_batch(DICT, [4, 7, 2], seed=3)
    reference = greedy(model, batch)
    ours = decode(model, batch, JacobiDrafter(PAD, PAD, block=3, hybrid_length=hybrid_length), 3)
    assert_parity(reference, ours)
    assert [o[0]["steps"] for o in ours] == [len(r[0]["tokens"]) for r in reference]


def test_iad_drafts_the_whole_output_when_it_equals_the_input():
    """If the greedy output is a copy of the source, IAD needs one iteration: its first draft (after BOS, which
    occurs once) is the whole source. This model's greedy output of its own output is a fixed point of 16 tokens
    and EOS (found by feeding outputs back), the longest output the length limit allows."""
    model = build_transformer(DICT, seed=0, eos_boost=0.0)
    output = greedy(model, make_batch(DICT, [6], seed=0))[0][0]["tokens"]
    for _ in range(5):  # feed the model's own output back as its source until the output repeats
        src = output.unsqueeze(0)
        batch = {"id": torch.tensor([0]), "net_input": {"src_tokens": src, "src_lengths": torch.tensor([src.size(1)])}}
        new_output = greedy(model, batch)[0][0]["tokens"]
        if new_output.tolist() == output.tolist():
            break
        output = new_output
    reference = greedy(model, batch)
    assert reference[0][0]["tokens"].tolist() == src[0].tolist() and src.size(1) == 17
    ours = decode(model, batch, SourceCopyDrafter(PAD), 64)
    assert_parity(reference, ours)
    assert ours[0][0]["steps"] == 1


def test_iad_with_nothing_in_common_decodes_one_token_per_iteration():
    big = make_dictionary(60)
    model = build_transformer(big, seed=11, eos_boost=1.0)
    checked = 0
    for seed in range(20):
        batch = make_batch(big, [2], seed=seed)
        reference = SequenceGenerator([model], big, beam_size=1, max_len_b=16).generate([model], batch)
        cfg = SpeculativeConfig(block_size=64, max_len_b=16)
        ours = SpeculativeGenerator(model, big, SourceCopyDrafter(PAD), cfg).generate([model], batch)
        assert_parity(reference, ours)
        source_words = set(batch["net_input"]["src_tokens"][0].tolist()) - {PAD, EOS}
        if not source_words & set(reference[0][0]["tokens"].tolist()):
            checked += 1
            assert ours[0][0]["steps"] == len(reference[0][0]["tokens"])
    assert checked > 0


def test_jacobi_guesses_are_verified_whole():
    """PJ starts from pad guesses: the core verifies them (the verifier's choices there are
    the next iterate) instead of cutting the block at the first pad."""
    assert JacobiDrafter.verify_every_column
    model = build_transformer(DICT, seed=1)
    generator = SpeculativeGenerator(model, DICT, JacobiDrafter(init_token=PAD, pad=PAD),
                                     SpeculativeConfig(block_size=64, max_len_b=16))
    widths = []
    verify = generator._verify
    generator._verify = lambda cache, state, drafts, limits: widths.append(drafts.size(1)) or verify(cache, state, drafts, limits)
    assert_parity(greedy(model, make_batch(DICT, [5, 8], seed=0)), generator.generate([model], make_batch(DICT, [5, 8], seed=0)))
    assert widths[0] == 16  # the first block: the whole pad guess, verified
