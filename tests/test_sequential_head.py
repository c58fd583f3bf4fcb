"""The block drafter's sequential head (models/sequential_head.py): what its batched candidate walk drafts, that
SpecDec with it is still greedy's output (cached and uncached, ragged batches), and its training script end to end."""
import re
import subprocess
import sys

import pytest
import torch
from fairseq.sequence_generator import SequenceGenerator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import run_cli
import drafter_helpers
from drafter_helpers import build_drafter, build_verifier, make_dictionary
from fairseq_plugins.decoding.core import SpeculativeConfig, SpeculativeGenerator
from fairseq_plugins.decoding.cuda_graphs import graph_problems
from fairseq_plugins.decoding.drafters import BatchStart
from fairseq_plugins.decoding.head_drafting import HeadDrafting
from fairseq_plugins.decoding.specdec import BlockDrafter
from test_cli_end_to_end import hypotheses
from test_specdec_cli import PLUGIN

DICT = make_dictionary(14)


def drafter_with_head(seed, **options):
    return drafter_helpers.drafter_with_head(DICT, seed, **options)


def block_states(drafter, batch, prefix_lengths):
    src = batch["net_input"]["src_tokens"]
    encoder_out = drafter.encoder(src, src_lengths=batch["net_input"]["src_lengths"])
    g = torch.Generator().manual_seed(0)
    prefix = torch.randint(DICT.nspecial, len(DICT), (src.size(0), max(prefix_lengths)), generator=g)
    prefix[:, 0] = DICT.eos()
    for i, n in enumerate(prefix_lengths):
        prefix[i, n:] = DICT.pad()
    lengths = torch.tensor(prefix_lengths)
    states = drafter.decoder.propose_states(encoder_out, prefix, lengths, drafter.block_size)
    return states, drafter.decoder.propose_logits(states), prefix.gather(1, (lengths - 1)[:, None]).squeeze(1)


def one_token_at_a_time(decoder, states, logits_width, last):
    """The head's drafts by its definition: position after position, argmax over the whole (limited) vocabulary."""
    head, drafted = decoder.sequential_head, []
    previous = last
    for j in range(states.size(1)):
        logits = decoder.output_layer(head(states[:, j], decoder.embed_tokens(previous))).float()[:, :logits_width]
        logits[:, [b for b in decoder.banned if b < logits_width]] = float("-inf")
        previous = logits.argmax(-1)
        drafted.append(previous)
    return torch.stack(drafted, dim=1)


@pytest.mark.parametrize("vocab_limit", [0, 9])
def test_the_walk_among_all_candidates_drafts_as_the_head_one_token_at_a_time(vocab_limit):
    from tiny_models import make_batch

    drafter = drafter_with_head(3)
    states, logits, last = block_states(drafter, make_batch(DICT, [5, 3, 7], seed=1), [1, 4, 2])
    width = vocab_limit or len(DICT)
    logits = logits[..., :width]
    walk = HeadDrafting(drafter.decoder, vocab_limit, n_candidates=len(DICT)).draft(states, logits, last)
    expected = one_token_at_a_time(drafter.decoder, states, width, last)
    assert torch.equal(walk, expected)
    assert not torch.equal(walk, logits.argmax(-1)), "the head should draft otherwise than the block here"


def test_a_fresh_head_drafts_the_blocks_own_tokens():
    from tiny_models import make_batch

    drafter = build_drafter(DICT, seed=4, sequential_head=True)  # W2 = 0: the identity
    states, logits, last = block_states(drafter, make_batch(DICT, [4, 6], seed=2), [3, 1])
    for m in (1, 3, len(DICT)):
        assert torch.equal(HeadDrafting(drafter.decoder, 0, m).draft(states, logits, last), logits.argmax(-1))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 500), src_lengths=st.lists(st.integers(1, 9), min_size=1, max_size=4),
       k=st.integers(1, 4), adaptive=st.booleans(), candidates=st.sampled_from([1, 3, 8]))
def test_specdec_with_a_head_is_greedy_cached_or_not(seed, src_lengths, k, adaptive, candidates):
    """Parity: drafts of a head (any number of candidates) keep greedy's output, batch 1 and more; the cached and
    uncached drafters draft alike (the same iterations)."""
    from tiny_models import make_batch

    verifier = build_verifier(DICT, seed=seed)
    drafter = drafter_with_head(seed + 1)
    batch = make_batch(DICT, src_lengths, seed=seed)
    cfg = SpeculativeConfig(block_size=k, adaptive=adaptive, max_len_b=14)
    runs = [SpeculativeGenerator(verifier, DICT, BlockDrafter(drafter, cached=cached, head_candidates=candidates),
                                 cfg).generate([verifier], batch) for cached in (True, False)]
    greedy = SequenceGenerator([verifier], DICT, beam_size=1, max_len_b=14).generate([verifier], batch)
    for with_cache, without, reference in zip(*runs, greedy):
        assert with_cache[0]["tokens"].tolist() == without[0]["tokens"].tolist() == reference[0]["tokens"].tolist()
        assert with_cache[0]["accepted_per_iteration"] == without[0]["accepted_per_iteration"]


def test_head_candidates_zero_leaves_the_head_out():
    from tiny_models import make_batch

    drafter = drafter_with_head(5)
    batch = make_batch(DICT, [6, 4], seed=3)
    start = BatchStart(batch["net_input"]["src_tokens"], batch["net_input"]["src_lengths"], 20, None)
    tokens = torch.full((2, 8), DICT.pad())
    tokens[:, 0] = DICT.eos()
    drafts = {}
    for candidates in (0, len(DICT)):
        adapter = BlockDrafter(drafter, head_candidates=candidates)
        adapter.start(start)
        drafts[candidates] = adapter.propose(tokens, torch.tensor([1, 1]), 4)
    assert drafts[0].scores is not None and torch.equal(drafts[0].tokens, drafts[0].scores.argmax(-1))
    assert not torch.equal(drafts[0].tokens, drafts[len(DICT)].tokens)
    assert "sequential head" not in graph_problems(BlockDrafter(drafter), build_verifier(DICT))  # the steps run it


def train_head(data, drafter, out, *extra, check=True):
    return subprocess.run([sys.executable, "-m", "fairseq_plugins.scripts.train_sequential_head", str(data),
                           "--drafter", str(drafter), "--save-to", str(out), "--threads", "1", *map(str, extra)],
                          capture_output=True, text=True, check=check, timeout=600)


@pytest.fixture(scope="module")
def head_drafter(reverse_data, drafter, tmp_path_factory):
    """(``drafter`` with a sequential head trained 200 updates, the training's log)."""
    root = tmp_path_factory.mktemp("head")
    proc = train_head(reverse_data, drafter, root / "with_head.pt", "--updates", 200, "--batch-size", 32,
                      "--log-every", 50, "--lr", "3e-3")
    return root / "with_head.pt", proc.stderr


@pytest.mark.slow
def test_the_head_learns_and_specdec_with_it_is_greedy(reverse_data, tiny_checkpoint, head_drafter, stock_greedy,
                                                      tmp_path):
    """train_sequential_head lowers its loss below the block's own, writes an inference checkpoint (no optimizer
    state, no machine paths) that loads with its head (also exported --fp16), and fairseq-generate --decoding
    specdec with it is --beam 1's output."""
    from fairseq import checkpoint_utils

    from fairseq_plugins.scripts.export_checkpoint import export
    from fairseq_plugins_compat.checkpoint_loading import load_checkpoint_file
    from test_script_outputs import machine_paths

    path, log = head_drafter
    losses = [(float(a), float(b)) for a, b in re.findall(r"loss ([\d.]+) with the head, ([\d.]+) the block's", log)]
    assert len(losses) == 4, log[-2000:]
    assert losses[-1][0] < losses[0][0] and losses[-1][0] < losses[-1][1], losses
    state = load_checkpoint_file(str(path))
    assert "last_optimizer_state" not in state, "the block's training state was copied into the head's drafter"
    assert machine_paths(path) == []
    models, _cfg, _task = checkpoint_utils.load_model_ensemble_and_task([str(path)], {"data": str(reverse_data)})
    assert models[0].decoder.sequential_head is not None
    exported = tmp_path / "with_head-fp16.pt"
    export(path, exported, fp16=True)
    models, _cfg, _task = checkpoint_utils.load_model_ensemble_and_task([str(exported)], {"data": str(reverse_data)})
    assert models[0].decoder.sequential_head is not None
    assert models[0].decoder.sequential_head.outer.weight.abs().sum() > 0
    common = ["--path", tiny_checkpoint, "--gen-subset", "test", "--max-len-b", 30]
    for batch_size in (1, 5):
        greedy = hypotheses(stock_greedy(batch_size))
        specdec = run_cli("fairseq-generate", reverse_data, *PLUGIN, *common, "--batch-size", batch_size,
                          "--drafter-path", exported, "--decoding", "specdec")
        assert hypotheses(specdec.stdout) == greedy and len(greedy) == 24


@pytest.mark.slow
def test_export_can_drop_the_head_leaving_the_block(reverse_data, tiny_checkpoint, head_drafter, tmp_path):
    """export_checkpoint --drop-sequential-head: the block alone, which fairseq-train --finetune-from-model builds
    and loads (a head's weights in the checkpoint would be unexpected keys there)."""
    from fairseq import checkpoint_utils

    from fairseq_plugins.scripts.export_checkpoint import main

    path, _log = head_drafter
    block = tmp_path / "block.pt"
    main([str(path), str(block), "--drop-sequential-head"])
    [with_head], _cfg, _task = checkpoint_utils.load_model_ensemble_and_task([str(path)], {"data": str(reverse_data)})
    [alone], _cfg, _task = checkpoint_utils.load_model_ensemble_and_task([str(block)], {"data": str(reverse_data)})
    assert getattr(alone.decoder, "sequential_head", None) is None
    expected = {k: v for k, v in with_head.named_parameters() if ".sequential_head." not in k}
    kept = dict(alone.named_parameters())
    assert expected.keys() == kept.keys()
    assert [k for k, v in expected.items() if not torch.equal(v, kept[k])] == []
    proc = subprocess.run([sys.executable, "-m", "fairseq_plugins.scripts.export_checkpoint", str(block),
                           str(tmp_path / "again.pt"), "--drop-sequential-head"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1].endswith(f"{block} has no sequential head to drop")


@pytest.mark.slow
def test_bad_input_is_one_line(reverse_data, tiny_checkpoint, tmp_path):
    proc = train_head(reverse_data, tiny_checkpoint, tmp_path / "x.pt", check=False)
    assert proc.returncode == 1 and "is not a block drafter checkpoint" in proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    proc = train_head(reverse_data, tmp_path / "missing.pt", tmp_path / "x.pt", check=False)
    assert proc.returncode == 1 and "missing.pt does not exist" in proc.stderr and "Traceback" not in proc.stderr
    proc = train_head(reverse_data, tiny_checkpoint, tmp_path / "x.pt", "--updates", 0, check=False)
    assert proc.returncode == 1 and "--updates must be >= 1" in proc.stderr


def test_drafter_only_drafts_through_the_head_unless_told_not_to():
    import argparse

    from fairseq_plugins.decoding.drafter_only import DrafterOnlyGenerator
    from tiny_models import make_batch

    drafter = drafter_with_head(6)
    batch = make_batch(DICT, [6, 4, 5], seed=4)
    args = argparse.Namespace(max_len_a=0.0, max_len_b=9)
    outputs = {}
    for candidates in (0, len(DICT)):
        generator = DrafterOnlyGenerator(drafter, DICT, 3, args, head_candidates=candidates)
        assert (generator.drafter.head is None) == (candidates == 0)
        outputs[candidates] = [hypos[0]["tokens"].tolist() for hypos in generator.generate([drafter], batch)]
    assert outputs[0] != outputs[len(DICT)]


@pytest.mark.slow
@pytest.mark.parametrize("decoding, options, uses_head", [
    ("specdec", {}, True), ("specdec++", {}, False), ("specdec", {"beta": 3}, False), ("specdec", {"tau": 0.5}, False),
    ("specdec++", {"head_candidates": 8}, True), ("specdec", {"head_candidates": 0}, False),
    ("drafter-only", {}, True), ("drafter-only", {"head_candidates": 0}, False)])
def test_the_head_is_used_by_default_only_where_the_drafts_cannot_change_the_output(reverse_data, tiny_checkpoint,
                                                                                   head_drafter, decoding, options,
                                                                                   uses_head):
    from fairseq_plugins.api import Translator

    translator = Translator.load(str(tiny_checkpoint), str(reverse_data), drafter=str(head_drafter[0]),
                                 decoding=decoding, source_lang="src", target_lang="tgt", **options)
    assert (translator.generator.drafter.head is not None) == uses_head


@pytest.mark.slow
@pytest.mark.parametrize("decoding", ["specdec", "drafter-only"])
def test_negative_head_candidates_is_one_line(reverse_data, tiny_checkpoint, head_drafter, decoding):
    proc = run_cli("fairseq-generate", reverse_data, *PLUGIN, "--path", tiny_checkpoint, "--gen-subset", "test",
                   "--drafter-path", head_drafter[0], "--decoding", decoding, "--head-candidates", -1, check=False)
    assert proc.returncode != 0 and "--head-candidates must be >= 0" in proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
