"""Double-token bidirectional decoding: reordering, mask, incremental decoding, search.

All in-process on tiny random models (float64 where outputs are compared exactly).
"""
import argparse

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import fairseq_plugins  # noqa: F401  (registers the task and the model)
from fairseq.data import Dictionary, LanguagePairDataset
from fairseq.models import ARCH_CONFIG_REGISTRY
from fairseq.tasks.translation import TranslationConfig, TranslationTask
from fairseq_plugins.double_token.dataset import DECODING_TARGET, DecodingOrderDataset
from fairseq_plugins.decoding.linears import packed_available
from fairseq_plugins.double_token.generator import DoubleTokenGenerator
from fairseq_plugins.double_token.reorder import (
    TARGET_ORDERS,
    TOKENS_PER_STEP,
    from_decoding_order,
    natural_indices,
    to_decoding_order,
)
from fairseq_plugins.models.double_token_transformer import step_mask
from fairseq_plugins.tasks.double_token_translation import DoubleTokenTranslationConfig, DoubleTokenTranslationTask
from fairseq_plugins_compat.errors import PluginError


EOD = 2  # fairseq's eos index: EOD is the eos symbol
WORDS = st.lists(st.integers(min_value=4, max_value=40), max_size=41)


# -- reordering ------------------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(tokens=WORDS, order=st.sampled_from(TARGET_ORDERS))
def test_reorder_round_trip_every_length(tokens, order):
    seq = to_decoding_order(tokens, order, EOD)
    k = TOKENS_PER_STEP[order]
    assert len(seq) % k == 0 and 1 <= seq.count(EOD) <= k
    assert seq[len(tokens):] == [EOD] * seq.count(EOD) and sorted(seq[: len(tokens)]) == sorted(tokens)
    assert from_decoding_order(seq, order, EOD) == tokens


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5])
@pytest.mark.parametrize("order", TARGET_ORDERS)
def test_reorder_round_trip_short(n, order):
    tokens = list(range(10, 10 + n))
    assert from_decoding_order(to_decoding_order(tokens, order, EOD), order, EOD) == tokens


def test_bidirectional_layout_matches_paper():
    """Fig. 2: "We will go to Tokyo ." -> (We, .) (will, Tokyo) (go, to) (EOD, EOD)."""
    words = "We will go to Tokyo .".split()
    ids = {w: 10 + i for i, w in enumerate(words)}
    names = {v: k for k, v in ids.items()} | {EOD: "EOD"}
    seq = to_decoding_order([ids[w] for w in words], "bidirectional", EOD)
    assert [names[t] for t in seq] == ["We", ".", "will", "Tokyo", "go", "to", "EOD", "EOD"]
    assert to_decoding_order([], "bidirectional", EOD) == [EOD, EOD]
    assert to_decoding_order([7], "bidirectional", EOD) == [7, EOD]
    assert to_decoding_order([7, 8, 9], "bidirectional", EOD) == [7, 9, 8, EOD]
    assert to_decoding_order([7, 8, 9], "double_r2l", EOD) == [9, 8, 7, EOD]
    assert to_decoding_order([7, 8], "single_r2l", EOD) == [8, 7, EOD]


@settings(max_examples=200, deadline=None)
@given(seq=st.lists(st.integers(min_value=2, max_value=9), max_size=20), order=st.sampled_from(TARGET_ORDERS))
def test_inverse_of_any_generated_sequence(seq, order):
    """Any search output maps to a sentence: tokens up to the first unit holding EOD."""
    k = TOKENS_PER_STEP[order]
    index, eods = natural_indices(seq, order, EOD)
    units = [seq[i:i + k] for i in range(0, len(seq), k)]
    end = next((u + 1 for u, unit in enumerate(units) if EOD in unit), len(units))
    assert sorted(index + eods) == list(range(min(len(seq), end * k)))
    assert EOD not in [seq[i] for i in index]


def test_batches_carry_both_orders():
    """Natural ``target`` (references), decoding-order target, shifted decoder inputs."""
    dictionary = _dictionary()
    targets = [torch.tensor(list(range(4, 4 + n)) + [EOD]) for n in (0, 1, 4, 5)]
    sources = [torch.tensor([5, 6, EOD])] * 4
    inner = LanguagePairDataset(sources, [3] * 4, dictionary, targets, [len(t) for t in targets], dictionary)
    batch = DecodingOrderDataset(inner, "bidirectional", dictionary).collater([inner[i] for i in range(4)])
    pad, bos = dictionary.pad(), dictionary.bos()
    target, prev = batch[DECODING_TARGET], batch["net_input"]["prev_output_tokens"]
    for i, sid in enumerate(batch["id"].tolist()):
        natural = targets[sid].tolist()
        assert [t for t in batch["target"][i].tolist() if t != pad] == natural
        expected = to_decoding_order(natural[:-1], "bidirectional", EOD)
        assert target[i].tolist() == expected + [pad] * (target.size(1) - len(expected))
        assert prev[i, : len(expected)].tolist() == [bos, EOD] + expected[:-2]
    assert torch.equal(prev.eq(pad), target.eq(pad))
    assert batch["ntokens"] == int(target.ne(pad).sum())


# -- model -----------------------------------------------------------------------------------

def _dictionary(size=20):
    dictionary = Dictionary()
    for i in range(size):
        dictionary.add_symbol(f"w{i}")
    return dictionary


def build(order="bidirectional", dtype=torch.float64, **overrides):
    """(task, model) of the tiny arch over a 24-symbol joined dictionary, in eval mode."""
    dictionary = _dictionary()
    cfg = DoubleTokenTranslationConfig(data="", source_lang="src", target_lang="tgt", target_order=order)
    task = DoubleTokenTranslationTask(cfg, dictionary, dictionary)
    args = argparse.Namespace(arch="double_token_transformer_tiny", share_all_embeddings=True, dropout=0.0, **overrides)
    ARCH_CONFIG_REGISTRY[args.arch](args)
    torch.manual_seed(0)
    model = task.build_model(args).to(dtype).eval()
    return task, model


def _inputs(model, bsz=3, src_len=6, tgt_len=8, seed=1):
    gen = torch.Generator().manual_seed(seed)
    vocab = len(model.decoder.dictionary)
    src = torch.randint(4, vocab, (bsz, src_len), generator=gen)
    src[:, -1] = EOD
    src[0, :2] = model.encoder.padding_idx  # left-padded source row
    src_lengths = src.ne(model.encoder.padding_idx).sum(1)
    prev = torch.randint(4, vocab, (bsz, tgt_len), generator=gen)
    return src, src_lengths, prev


def test_step_mask_structure():
    allowed = step_mask(6, 2).eq(0).int().tolist()
    assert allowed == [
        [1, 1, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0],
        [1, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1],
    ]
    assert torch.equal(step_mask(5, 1).eq(0), torch.ones(5, 5).tril().bool())
    _, model = build()
    x = torch.zeros(7, 1, 4)
    assert torch.equal(model.decoder.buffered_future_mask(x), step_mask(7, 2).to(x))


@pytest.mark.parametrize("position", [2, 3, 5])
def test_outputs_see_their_pair_and_nothing_later(position):
    """Changing input ``position`` changes both outputs of its pair, no earlier output."""
    _, model = build()
    src, src_lengths, prev = _inputs(model)
    encoder_out = model.encoder(src, src_lengths=src_lengths)
    changed = prev.clone()
    changed[:, position] = 4 + (changed[:, position] - 3) % 16
    before, _ = model.decoder(prev, encoder_out=encoder_out)
    after, _ = model.decoder(changed, encoder_out=encoder_out)
    pair = position // 2 * 2
    assert torch.equal(before[:, :pair], after[:, :pair])
    assert not torch.isclose(before[:, pair:pair + 2], after[:, pair:pair + 2]).all(-1).any()


@pytest.mark.parametrize("order", ["bidirectional", "single_r2l"])
def test_incremental_decoding_equals_full_recomputation(order):
    """One step (k tokens) at a time with cached keys/values == recomputing the prefix,
    across a beam reorder (rows stay within their sentence, as in a search) and a
    retirement (a sentence leaves the batch). Tolerance: fairseq's incremental attention
    takes its softmax in float32 even for a float64 model."""
    _, model = build(order)
    k = TOKENS_PER_STEP[order]
    src, src_lengths, _ = _inputs(model)
    _, _, prev = _inputs(model, bsz=6, tgt_len=4 * k, seed=2)
    encoder_out = model.encoder(src, src_lengths=src_lengths)
    encoder_out = model.encoder.reorder_encoder_out(encoder_out, torch.tensor([0, 0, 1, 1, 2, 2]))
    reorders = {2 * k: torch.tensor([1, 1, 3, 2, 4, 4]), 3 * k: torch.tensor([2, 3, 4, 5])}
    state, pieces, expected = {}, [], []
    for end in range(k, prev.size(1) + 1, k):
        if end in reorders:
            rows = reorders[end]
            model.decoder.reorder_incremental_state_scripting(state, rows)
            encoder_out = model.encoder.reorder_encoder_out(encoder_out, rows)
            prev = prev[rows]
        logits, _ = model.decoder(prev[:, :end], encoder_out=encoder_out, incremental_state=state)
        full, _ = model.decoder(prev[:, :end], encoder_out=encoder_out)
        assert logits.shape == full[:, -k:].shape
        pieces.append(logits)
        expected.append(full[:, -k:])
    for piece, full in zip(pieces, expected):
        assert torch.allclose(piece, full, atol=1e-6, rtol=0)


def test_model_checks_task_and_order():
    dictionary = _dictionary()
    translation = TranslationTask(TranslationConfig(data=""), dictionary, dictionary)
    args = argparse.Namespace(arch="double_token_transformer_tiny", share_all_embeddings=True)
    ARCH_CONFIG_REGISTRY[args.arch](args)
    with pytest.raises(PluginError, match="needs --task double_token_translation"):
        translation.build_model(args)
    with pytest.raises(PluginError, match="trained with --target-order double_l2r"):
        build("bidirectional", target_order="double_l2r")


# -- generator on a model ------------------------------------------------------------------

@pytest.mark.parametrize("order", ["bidirectional", "double_l2r", "double_r2l"])
@pytest.mark.parametrize("beam", [1, 3])
def test_generator_hypotheses_and_batching(order, beam):
    """fairseq hypothesis dicts; a batch decodes exactly as its sentences one by one."""
    task, model = build(order)
    src, src_lengths, _ = _inputs(model, bsz=3, src_len=7, seed=order.__len__() + beam)
    args = argparse.Namespace(beam=beam, nbest=beam, max_len_a=0, max_len_b=9, lenpen=1.0)
    generator = task.build_generator([model], args)
    assert isinstance(generator.generator, DoubleTokenGenerator)  # in a PackedLinearsGenerator
    batch = generator.generate([model], {"net_input": {"src_tokens": src, "src_lengths": src_lengths}})
    for i, hyps in enumerate(batch):
        length = int(src_lengths[i])
        single = {"net_input": {"src_tokens": src[i:i + 1, -length:], "src_lengths": src_lengths[i:i + 1]}}
        alone = generator.generate([model], single)[0]
        assert [h["tokens"].tolist() for h in hyps] == [h["tokens"].tolist() for h in alone]
        assert 1 <= len(hyps) <= beam
        assert [float(h["score"]) for h in hyps] == sorted((float(h["score"]) for h in hyps), reverse=True)
        for h in hyps:
            assert h["tokens"][-1] == EOD and EOD not in h["tokens"][:-1].tolist()
            assert h["attention"] is None and h["alignment"] is None
            assert len(h["positional_scores"]) == len(h["tokens"]) and len(h["tokens"]) <= 10
            assert float(h["positional_scores"].sum()) / (2 * h["steps"]) == pytest.approx(float(h["score"]), rel=1e-5)


def test_bad_generation_options_raise_one_plugin_error():
    task, model = build()
    args = argparse.Namespace(beam=2, nbest=3, sampling=True, prefix_size=1)
    with pytest.raises(PluginError) as error:
        task.build_generator([model, model], args)
    message = str(error.value)
    assert "\n" not in message
    for option in ("ensemble", "--sampling", "--nbest larger than --beam", "--prefix-size"):
        assert option in message


def test_single_r2l_uses_fairseq_search_reversed_back():
    """single_r2l: fairseq's SequenceGenerator on the reversed order, hypotheses reversed back."""
    from fairseq.sequence_generator import SequenceGenerator

    task, model = build("single_r2l")
    src, src_lengths, _ = _inputs(model)
    sample = {"net_input": {"src_tokens": src, "src_lengths": src_lengths}}
    ours = task.build_generator([model], argparse.Namespace(beam=2, nbest=2, max_len_b=8))
    stock = SequenceGenerator([model], task.tgt_dict, beam_size=2, max_len_b=8)
    for restored, raw in zip(ours.generate([model], sample), stock.generate([model], sample)):
        for mine, theirs in zip(restored, raw):
            assert mine["tokens"].tolist() == theirs["tokens"][:-1].flip(0).tolist() + [EOD]
            assert torch.equal(mine["positional_scores"][:-1], theirs["positional_scores"][:-1].flip(0))
            assert float(mine["score"]) == float(theirs["score"])


@pytest.mark.skipif(not packed_available(), reason="this PyTorch has no oneDNN packed linear")
@pytest.mark.parametrize("order", ["bidirectional", "single_l2r"])
def test_packed_linears_run_while_generating_only(order):
    """--packed-linears auto: float32 linear layers run packed during ``generate`` and are the
    modules' own again after; the hypotheses are those of --packed-linears off."""
    task, model = build(order, dtype=torch.float32)
    src, src_lengths, _ = _inputs(model)
    sample = {"net_input": {"src_tokens": src, "src_lengths": src_lengths}}
    args = argparse.Namespace(beam=3, nbest=3, max_len_b=8)
    fc1 = model.decoder.layers[0].fc1
    packed_calls = []
    fc1.register_forward_hook(lambda module, inputs, output: packed_calls.append("forward" in vars(module)))
    packed = task.build_generator([model], args).generate([model], sample)
    assert packed_calls and all(packed_calls)
    assert "forward" not in vars(fc1)
    task.cfg.packed_linears = "off"
    packed_calls.clear()
    plain = task.build_generator([model], args).generate([model], sample)
    assert packed_calls and not any(packed_calls)
    for ours, theirs in zip(packed, plain):
        assert [h["tokens"].tolist() for h in ours] == [h["tokens"].tolist() for h in theirs]
        assert [float(h["score"]) for h in ours] == pytest.approx([float(h["score"]) for h in theirs], rel=1e-5)


@pytest.mark.skipif(not packed_available(), reason="this PyTorch has no oneDNN packed linear")
def test_validation_generator_packs_the_weights_of_each_validation():
    """--eval-bleu's generator (built with the model) repacks on every generate: an optimizer
    step changes the weights through ``.data``, which no version stamp sees."""
    dictionary = _dictionary()
    cfg = DoubleTokenTranslationConfig(data="", source_lang="src", target_lang="tgt", eval_bleu=True,
                                       eval_bleu_detok="space", eval_bleu_args='{"beam": 2}')
    task = DoubleTokenTranslationTask(cfg, dictionary, dictionary)
    args = argparse.Namespace(arch="double_token_transformer_tiny", share_all_embeddings=True, dropout=0.0)
    ARCH_CONFIG_REGISTRY[args.arch](args)
    torch.manual_seed(0)
    model = task.build_model(args).float().eval()
    src, src_lengths, _ = _inputs(model)
    sample = {"net_input": {"src_tokens": src, "src_lengths": src_lengths}}
    validation = task.sequence_generator
    validation.generate([model], sample)  # packs the weights as they are now
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.data.add_(torch.randn_like(parameter), alpha=0.5)  # as an optimizer step does
    task.cfg.packed_linears = "off"
    plain = task.build_generator([model], argparse.Namespace(beam=2))
    expected = [[h["tokens"].tolist() for h in hyps] for hyps in plain.generate([model], sample)]
    assert [[h["tokens"].tolist() for h in hyps] for hyps in validation.generate([model], sample)] == expected
