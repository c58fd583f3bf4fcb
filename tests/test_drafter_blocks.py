"""Block drafter inputs: visibility mask, layout, positions, training blocks, glancing."""
import pytest
import torch

from drafter_helpers import build_drafter, make_dictionary, random_batch
from fairseq_plugins.models import drafter_blocks as blocks
from fairseq_plugins_compat.errors import PluginError

PAD, EOS = 1, 2


def test_mask_prefix_is_causal_and_never_sees_queries():
    allowed = blocks.block_attention_mask(prefix_len=3, k=2)
    expected = torch.tensor([
        # p0 p1 p2 q0 q1
        [1, 0, 0, 0, 0],  # p0
        [1, 1, 0, 0, 0],  # p1
        [1, 1, 1, 0, 0],  # p2
        [1, 1, 1, 1, 1],  # q0 sees the whole prefix and every query
        [1, 1, 1, 1, 1],  # q1
    ], dtype=torch.bool)
    assert torch.equal(allowed, expected)


def test_mask_bidirectional_prefix_still_hides_queries():
    allowed = blocks.block_attention_mask(prefix_len=3, k=2, prefix_causal=False)
    assert allowed[:3, :3].all() and not allowed[:3, 3:].any() and allowed[3:].all()


def test_block_input_pads_past_prefix_length_and_marks_keys():
    prefix = torch.tensor([[EOS, 7, 8], [EOS, 9, 9]])  # row 1 has length 1: the 9s are garbage
    queries = torch.full((2, 2), 3)
    tokens, key_padding = blocks.block_input(prefix, torch.tensor([3, 1]), queries, PAD)
    assert tokens.tolist() == [[EOS, 7, 8, 3, 3], [EOS, PAD, PAD, 3, 3]]
    assert key_padding.tolist() == [[False] * 5, [False, True, True, False, False]]


def test_make_blocks_prefix_gold_and_padding_past_eos():
    target = torch.tensor([[10, 11, 12, EOS], [20, EOS, PAD, PAD]])
    prefix, lengths, gold = blocks.make_blocks(target, torch.tensor([1, 1]), k=3, pad=PAD, eos=EOS)
    assert prefix.tolist() == [[EOS, 10], [EOS, 20]]
    assert lengths.tolist() == [2, 2]
    assert gold.tolist() == [[11, 12, EOS], [EOS, PAD, PAD]]  # eos is learned, past it is pad
    prefix, lengths, gold = blocks.make_blocks(target, torch.tensor([0, 1]), k=2, pad=PAD, eos=EOS)
    assert prefix.tolist() == [[EOS, PAD], [EOS, 20]] and gold.tolist() == [[10, 11], [EOS, PAD]]


def test_prefix_lengths_cover_zero_to_m_uniformly():
    target = torch.tensor([[10, 11, 12, EOS]] * 4000)  # m = 3: p in {0, 1, 2, 3}
    p = blocks.sample_prefix_lengths(target, PAD, torch.Generator().manual_seed(0))
    counts = torch.bincount(p, minlength=5)
    assert counts[4] == 0 and (counts[:4] > 900).all() and (counts[:4] < 1100).all()


def test_glance_reveals_floor_ratio_times_hamming_distance_of_valid_positions():
    gold = torch.tensor([[5, 6, 7, 8, 9, 10], [5, 6, EOS, PAD, PAD, PAD]])
    first = torch.tensor([[5, 0, 0, 0, 0, 10], [0, 0, 0, 0, 0, 0]])  # 4 wrong; 3 wrong (pads ignored)
    for seed in range(20):
        reveal, n_wrong, n_reveal = blocks.glance_reveal_mask(first, gold, PAD, 0.5, torch.Generator().manual_seed(seed))
        assert n_wrong.tolist() == [4, 3] and n_reveal.tolist() == [2, 1]
        assert reveal.sum(1).tolist() == [2, 1]
        assert not (reveal & gold.eq(PAD)).any()
    reveal, _, n_reveal = blocks.glance_reveal_mask(first, gold, PAD, 0.0)
    assert not reveal.any() and n_reveal.tolist() == [0, 0]


def test_glance_positions_are_random():
    gold = torch.arange(10, 30).view(1, 20)
    seen = {tuple(blocks.glance_reveal_mask(torch.zeros_like(gold), gold, PAD, 0.2, torch.Generator().manual_seed(s))[0][0].nonzero().view(-1).tolist())
            for s in range(10)}
    assert len(seen) > 5


def test_glance_ratio_anneals_linearly():
    assert blocks.glance_ratio(0, 0.5, 0.3, 1000) == pytest.approx(0.5)
    assert blocks.glance_ratio(500, 0.5, 0.3, 1000) == pytest.approx(0.4)
    assert blocks.glance_ratio(1000, 0.5, 0.3, 1000) == pytest.approx(0.3)
    assert blocks.glance_ratio(5000, 0.5, 0.3, 1000) == pytest.approx(0.3)
    assert blocks.glance_ratio(5000, 0.5, 0.3, 0) == pytest.approx(0.5)  # no schedule length


@pytest.fixture(scope="module")
def drafter_and_batch():
    dictionary = make_dictionary()
    drafter = build_drafter(dictionary, block_size=3)
    src, src_lengths, prefix, prefix_lengths = random_batch(dictionary, [6, 4], [4, 2])
    return dictionary, drafter, drafter.encoder(src, src_lengths), prefix, prefix_lengths


def _layer_outputs(drafter, encoder_out, prefix, prefix_lengths, queries):
    outputs = []
    hooks = [layer.register_forward_hook(lambda m, i, o: outputs.append(o[0].detach())) for layer in drafter.decoder.layers]
    try:
        logits = drafter.decoder.forward_block(encoder_out, prefix, prefix_lengths, queries)
    finally:
        for hook in hooks:
            hook.remove()
    return logits, outputs  # outputs: per layer (T, B, C)


def test_model_prefix_states_ignore_queries_and_queries_see_each_other(drafter_and_batch):
    dictionary, drafter, encoder_out, prefix, lengths = drafter_and_batch
    masks = drafter.decoder.mask_queries(2, 3, prefix.device)
    glanced = masks.clone()
    glanced[:, 2] = dictionary.index("w5")  # a revealed gold token at query 2
    logits_a, states_a = _layer_outputs(drafter, encoder_out, prefix, lengths, masks)
    logits_b, states_b = _layer_outputs(drafter, encoder_out, prefix, lengths, glanced)
    for a, b in zip(states_a, states_b):
        assert torch.allclose(a[:prefix.size(1)], b[:prefix.size(1)], atol=1e-6)  # prefix: unchanged
    assert not torch.allclose(logits_a[:, 0], logits_b[:, 0])  # query 0 sees query 2


def test_model_output_independent_of_padding_and_garbage_past_prefix(drafter_and_batch):
    dictionary, drafter, encoder_out, prefix, lengths = drafter_and_batch
    logits = drafter.decoder.forward_block(encoder_out, prefix, lengths)
    garbage = prefix.clone()
    garbage[1, 2:] = dictionary.index("w3")  # beyond row 1's length 2
    longer = torch.cat([prefix, torch.full((2, 3), dictionary.pad())], dim=1)  # more padding columns
    assert torch.allclose(logits, drafter.decoder.forward_block(encoder_out, garbage, lengths), atol=1e-5)
    assert torch.allclose(logits, drafter.decoder.forward_block(encoder_out, longer, lengths), atol=1e-5)


def test_model_row_alone_equals_row_in_padded_batch(drafter_and_batch):
    dictionary, drafter, _, _, _ = drafter_and_batch
    src, src_lengths, prefix, lengths = random_batch(dictionary, [6, 3], [5, 2], seed=3)
    batch = drafter.decoder.forward_block(drafter.encoder(src, src_lengths), prefix, lengths)
    alone = drafter.decoder.forward_block(drafter.encoder(src[1:, -3:], src_lengths[1:]), prefix[1:, :2], lengths[1:])
    assert torch.allclose(batch[1:], alone, atol=1e-5)


def test_propose_api_shapes_and_banned_symbols():
    dictionary = make_dictionary()
    drafter = build_drafter(dictionary, block_size=3)
    src, src_lengths, prefix, lengths = random_batch(dictionary, [6, 4], [4, 2])
    banned = torch.tensor([dictionary.unk(), dictionary.pad(), dictionary.bos()])
    with torch.no_grad():  # make unk (the mask symbol), pad and bos the favourite outputs
        drafter.decoder.output_projection.weight[banned] = 50.0
    encoder_out = drafter.encoder(src, src_lengths)
    assert drafter.block_size == 3 and drafter.max_positions() == (256, 259)
    draft = drafter.propose(encoder_out, prefix, lengths, 3)
    lprobs = drafter.propose_logits(encoder_out, prefix, lengths, 2)
    assert draft.shape == (2, 3) and draft.dtype == torch.long and lprobs.shape == (2, 2, len(dictionary))
    assert not torch.isin(draft, banned).any()
    assert torch.equal(lprobs.argmax(-1), draft[:, :2])  # k < block_size: the first k of the block
    assert torch.allclose(lprobs.exp().sum(-1), torch.ones(2, 2), atol=1e-5)
    with pytest.raises(PluginError, match="block size 3"):
        drafter.propose(encoder_out, prefix, lengths, 4)


def test_propose_near_the_end_of_the_position_table_runs_fewer_queries():
    dictionary = make_dictionary()
    drafter = build_drafter(dictionary, block_size=3, max_target_positions=8)
    src, src_lengths, prefix, lengths = random_batch(dictionary, [5], [6])
    encoder_out = drafter.encoder(src, src_lengths)
    assert drafter.propose(encoder_out, prefix, lengths, 2).shape == (1, 2)  # 6 + 2 positions fit
    with pytest.raises(PluginError, match="exceeds the drafter's 8 target positions"):
        drafter.propose(encoder_out, prefix, lengths, 3)


def _criterion(dictionary, **options):
    from drafter_helpers import DictTask
    from fairseq_plugins.criterions.glancing_block_loss import GlancingBlockLoss

    config = dict(label_smoothing=0.1, glance_ratio_start=0.5, glance_ratio_end=0.3, glance_anneal_updates=100,
                  valid_seed=1, max_update=0)
    return GlancingBlockLoss(DictTask(dictionary), **{**config, **options})


def _sample(dictionary, targets):
    src, src_lengths, _, _ = random_batch(dictionary, [5] * len(targets), [1] * len(targets))
    width = max(len(t) for t in targets) + 1
    target = torch.full((len(targets), width), dictionary.pad())
    for i, words in enumerate(targets):
        target[i, : len(words) + 1] = torch.tensor([dictionary.index(w) for w in words] + [dictionary.eos()])
    return {"id": torch.arange(len(targets)), "net_input": {"src_tokens": src, "src_lengths": src_lengths}, "target": target}


def test_criterion_learns_eos_and_ignores_positions_past_it():
    dictionary = make_dictionary()
    drafter, criterion = build_drafter(dictionary, block_size=4), _criterion(dictionary)
    only_eos = _sample(dictionary, [[], [], []])  # p = 0, gold block = eos pad pad pad
    _, sample_size, log = criterion(drafter.eval(), only_eos)
    assert log["ntokens"] == 3 and sample_size == 3 and log["n_revealed"] == 0


def test_criterion_validation_is_deterministic_and_training_glances():
    dictionary = make_dictionary()
    drafter, criterion = build_drafter(dictionary, block_size=4), _criterion(dictionary)
    sample = _sample(dictionary, [["w1", "w2", "w3", "w4", "w5", "w6"], ["w7", "w8"], ["w9"] * 5])
    first, second = criterion(drafter.eval(), sample), criterion(drafter.eval(), sample)
    assert torch.equal(first[0], second[0]) and first[2]["glance_ratio_sum"] == 0.0
    drafter.train()
    drafter.set_num_updates(50)  # halfway: ratio 0.4
    loss, sample_size, log = criterion(drafter, sample)
    assert log["glance_ratio_sum"] == pytest.approx(0.4 * 3)
    assert log["n_revealed"] > 0  # an untrained drafter gets most tokens wrong: some are revealed
    assert sample_size + log["n_revealed"] == log["ntokens"] and loss.requires_grad


def test_position_weights_decay_geometrically_with_mean_one():
    from fairseq_plugins.criterions.glancing_block_loss import position_weights

    weights = position_weights(4, 0.5, torch.zeros(1))
    assert torch.allclose(weights[1:] / weights[:-1], torch.full((3,), 0.5))
    assert weights.mean().item() == pytest.approx(1.0)
    assert torch.equal(position_weights(4, 1.0, torch.zeros(1)), torch.ones(4))


def test_criterion_position_weights_favour_the_first_block_positions():
    dictionary = make_dictionary()
    drafter = build_drafter(dictionary, block_size=4).eval()
    sample = _sample(dictionary, [["w1", "w2", "w3", "w4", "w5", "w6"], ["w7", "w8", "w9", "w1", "w2"]])
    uniform = _criterion(dictionary)
    decayed = _criterion(dictionary, position_weight_decay=0.5)
    p = torch.zeros(2, dtype=torch.long)  # blocks from the start: every block position is a gold token
    prefix, prefix_lengths, gold = blocks.make_blocks(sample["target"], p, 4, dictionary.pad(), dictionary.eos())
    logits, _ = drafter(sample["net_input"]["src_tokens"], sample["net_input"]["src_lengths"], prefix,
                        prefix_lengths=prefix_lengths)
    lprobs = torch.log_softmax(logits, dim=-1)
    in_loss = gold.ne(dictionary.pad())
    first_only = in_loss & (torch.arange(4) == 0)
    last_only = in_loss & (torch.arange(4) == 3)
    assert first_only.any() and last_only.any()
    # the same token losses weigh 8x more at position 0 than at position 3 (0.5 ** 3), the nll stays unweighted
    def weight(mask):
        return (decayed.block_loss(lprobs, gold, mask)[0] / uniform.block_loss(lprobs, gold, mask)[0]).item()
    assert weight(first_only) == pytest.approx(8 * weight(last_only), rel=1e-5)
    assert torch.allclose(decayed.block_loss(lprobs, gold, in_loss)[1], uniform.block_loss(lprobs, gold, in_loss)[1])
    assert decayed(drafter, sample)[1] == uniform(drafter, sample)[1]  # the same sample size


def test_criterion_refuses_a_position_weight_decay_outside_zero_one():
    with pytest.raises(PluginError, match="--position-weight-decay must be in"):
        _criterion(make_dictionary(), position_weight_decay=1.5)
