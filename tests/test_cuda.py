"""The GPU path: every lossless decoder == greedy on CUDA, in-process and through fairseq-generate.

Skipped without a CUDA device (marker ``cuda``; CI has none). In-process: random tiny verifiers
and drafters in float64 on the GPU (no rounding can tell a block forward from a token-by-token
one), ragged batches and batch 32, every drafter. Through the console scripts: a trained tiny
pair in float32 (identical to ``--beam 1``) and float16 (``--fp16``: close to ``--fp16 --beam 1``,
see the test), batch 1 and 32, specdec with ``--cuda-graphs`` auto (graphs at batch 1) and off.
"""
import pytest
import torch
from fairseq import utils
from fairseq.sequence_generator import SequenceGenerator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import PLUGIN_DIR, run_cli
from drafter_helpers import build_drafter, build_verifier, drafter_with_head
from fairseq_plugins.decoding.core import SpeculativeConfig, SpeculativeGenerator
from fairseq_plugins.decoding.drafters import Drafter
from fairseq_plugins.decoding.iad import SourceCopyDrafter
from fairseq_plugins.decoding.jacobi import JacobiDrafter
from fairseq_plugins.decoding.specdec import BlockDrafter
from test_cli_end_to_end import hypotheses
from test_cuda_graphs import graphed_generator, greedy_tokens
from conftest import train_drafter
from tiny_models import make_batch, make_dictionary

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

DICT = make_dictionary(14)
PAD, EOS = DICT.pad(), DICT.eos()


class RandomCudaDrafter(Drafter):
    """Random drafts on the GPU (a CPU generator, then moved: reproducible)."""

    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def propose(self, tokens, lengths, k):
        return torch.randint(DICT.nspecial - 2, len(DICT), (tokens.size(0), k), generator=self.g).to(tokens.device)


def drafter_for(name, seed):
    """(drafter, block size) of a lossless decoder, its models in float64 on the GPU."""
    if name == "specdec-head":
        return BlockDrafter(drafter_with_head(DICT, seed + 1).to("cuda", torch.float64)), 3
    if name.startswith("specdec"):
        model = build_drafter(DICT, seed=seed + 1).to("cuda", torch.float64)
        return BlockDrafter(model, cached=name != "specdec-uncached"), 3
    return {
        "random": (RandomCudaDrafter(seed), 4),
        "iad": (SourceCopyDrafter(PAD, match_length=1), 64),
        "jacobi": (JacobiDrafter(PAD, PAD, block=None), 64),
        "gs-jacobi": (JacobiDrafter(PAD, PAD, block=3), 3),
        "hybrid-jacobi": (JacobiDrafter(PAD, PAD, block=3, hybrid_length=5), 3),
    }[name]


def assert_greedy_parity(src_lengths, seed, name, adaptive):
    verifier = build_verifier(DICT, seed=seed).to("cuda", torch.float64)
    batch = utils.move_to_cuda(make_batch(DICT, src_lengths, seed=seed))
    reference = SequenceGenerator([verifier], DICT, beam_size=1, max_len_b=14).generate([verifier], batch)
    drafter, block_size = drafter_for(name, seed)
    cfg = SpeculativeConfig(block_size=block_size, adaptive=adaptive, max_len_b=14)
    ours = SpeculativeGenerator(verifier, DICT, drafter, cfg).generate([verifier], batch)
    assert len(ours) == len(reference)
    for ref, out in zip(reference, ours):
        assert out[0]["tokens"].tolist() == ref[0]["tokens"].tolist()
        torch.testing.assert_close(out[0]["positional_scores"], ref[0]["positional_scores"])


DECODERS = ["random", "specdec", "specdec-uncached", "specdec-head", "iad", "jacobi", "gs-jacobi", "hybrid-jacobi"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 500), src_lengths=st.lists(st.integers(1, 9), min_size=1, max_size=5),
       name=st.sampled_from(DECODERS), adaptive=st.booleans())
def test_every_drafter_gives_greedy_output_on_cuda(seed, src_lengths, name, adaptive):
    assert_greedy_parity(src_lengths, seed, name, adaptive)


@pytest.mark.parametrize("name", DECODERS)
def test_batch_32_on_cuda(name):
    lengths = [1 + (7 * i) % 11 for i in range(32)]
    assert_greedy_parity(lengths, seed=32, name=name, adaptive=True)


@pytest.mark.parametrize("with_head", [False, True])
def test_graphed_steps_draft_as_the_drafter_cache_on_cuda(with_head):
    """The static steps replayed as CUDA graphs (a sequential head's walk inside the drafter's graph): the ordinary
    cached drafter's drafts call by call, greedy's output."""
    verifier = build_verifier(DICT, seed=7).to("cuda", torch.float64)
    drafter = (drafter_with_head(DICT, 8) if with_head else build_drafter(DICT, seed=8)).to("cuda", torch.float64)
    generator, adapter = graphed_generator(verifier, drafter, 3, max_len_b=14)
    for i, length in enumerate([3, 7, 1, 9]):
        batch = utils.move_to_cuda(make_batch(DICT, [length], seed=i))
        ours = generator.generate([verifier], batch)
        assert [hypos[0]["tokens"].tolist() for hypos in ours] == greedy_tokens(verifier, batch, 14)
    assert adapter.static_proposals == adapter.proposals > 0 and adapter.differing == []
    assert adapter.static.graph is not None  # replayed, not eager


# --- through fairseq-generate: fp32 and fp16, batch 1 and 32 -------------------------------------
PLUGIN = ["--user-dir", PLUGIN_DIR, "--task", "speculative_translation"]
CLI_DECODERS = [  # the drafter (--drafter-path) is added to the specdec ones: the others refuse it
    ["--decoding", "specdec"],  # --cuda-graphs auto: on, at batch 1 (the drafter shares the verifier's encoder)
    ["--decoding", "specdec", "--draft-length", "fixed"],
    ["--decoding", "specdec", "--cuda-graphs", "off"],
    ["--decoding", "iad"],
    ["--decoding", "jacobi"],
    ["--decoding", "gs-jacobi"],
    ["--decoding", "hybrid-jacobi"],
]


def greedy_and_each_decoder(data, checkpoint, drafter, batch_size, *precision):
    """fairseq-generate on the GPU: ({id: --beam 1 hypothesis}, [{id: hypothesis} of each CLI_DECODERS])."""
    common = [data, "--path", checkpoint, "--gen-subset", "test", "--batch-size", batch_size, "--max-len-b", 30, *precision]
    greedy = hypotheses(run_cli("fairseq-generate", *common, "--beam", 1).stdout)
    assert len(greedy) == 24
    return greedy, [hypotheses(run_cli("fairseq-generate", *common, *PLUGIN, *decoder,
                                       *(["--drafter-path", drafter] if "specdec" in decoder else [])).stdout)
                    for decoder in CLI_DECODERS]


@pytest.mark.slow
@pytest.mark.parametrize("batch_size", [1, 32])
def test_fairseq_generate_on_cuda_equals_beam1(reverse_data, tiny_checkpoint, shared_drafter, batch_size):
    """float32 on the GPU: every decoder's output is --beam 1's, token for token."""
    greedy, outputs = greedy_and_each_decoder(reverse_data, tiny_checkpoint, shared_drafter, batch_size)
    for decoder, ours in zip(CLI_DECODERS, outputs):
        assert ours == greedy, decoder


@pytest.mark.slow
@pytest.mark.parametrize("batch_size", [1, 32])
def test_fairseq_generate_fp16_stays_close_to_fp16_beam1(reverse_data, tiny_checkpoint, shared_drafter, batch_size):
    """float16: a block of k+1 tokens and k+1 single-token steps may round differently, so a
    near-tie can go the other way (measured on the Multi30k pair: 1 sentence in 60-128 for
    block-verifying rows, README); every decoder stays within 1 of 8 sentences of --fp16 --beam 1."""
    greedy, outputs = greedy_and_each_decoder(reverse_data, tiny_checkpoint, shared_drafter, batch_size, "--fp16")
    for decoder, ours in zip(CLI_DECODERS, outputs):
        assert ours.keys() == greedy.keys()
        assert sum(ours[i] != greedy[i] for i in greedy) <= len(greedy) // 8, decoder


@pytest.mark.slow
def test_latency_harness_on_cuda(reverse_data, tiny_checkpoint, shared_drafter, tmp_path):
    """The harness times CUDA rows (synchronised), sweeps batch sizes and names the GPU."""
    import json

    from fairseq_plugins.bench import latency

    latency.main([str(reverse_data), "--path", str(tiny_checkpoint), "--drafter-path", str(shared_drafter),
                  "--decoders", "beam1,specdec,iad,oracle,bound", "--device", "cuda", "--max-len-b", "30",
                  "--warmup", "2", "--rounds", "2", "--batch-sizes", "1,8", "--no-ctranslate2", "--no-progress-bar",
                  "--out-json", str(tmp_path / "gpu.json")])
    result = json.loads((tmp_path / "gpu.json").read_text())
    assert result["hardware"]["gpu"] == torch.cuda.get_device_name()
    rows = [row for row in result["rows"] if row["decoder"] in ("specdec", "iad")]
    assert sorted(row["batch_size"] for row in rows) == [1, 1, 8, 8]
    assert all(row["mismatches_vs_greedy"] == 0 and row["median_ms"] > 0 for row in rows)
