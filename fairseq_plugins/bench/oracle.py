"""Two reference rows of the latency harness, both replaying the greedy (``beam1``) outputs:

- ``oracle`` (``oracle:k=10``): the speculative core (``decoding.core``) with a free drafter
  that drafts the verifier's own greedy continuation, k tokens per iteration (fixed length;
  the oracle never fails).  The best any drafter can do through this core: its time is the
  core's cost at about ceil(tokens / (k + 1)) iterations per sentence.
- ``bound``: per batch, the verifier's encoder and ONE teacher-forced pass over the greedy
  output through the lean verifier cache the plugin's decoders use (the whole output as one
  block): the lower bound of any draft-then-verify decoder on that arithmetic.  Its output is
  the greedy output, in one iteration.
"""
from typing import Callable, Dict, List, Optional, Tuple

import torch
from torch import Tensor

from fairseq_plugins.bench.timing import Batch, Output
from fairseq_plugins.decoding.drafters import BatchStart, Drafter
from fairseq_plugins_compat.errors import PluginError

ORACLE_BLOCK_SIZE = 10  # k of ``oracle`` without ``:k=``
GreedyOutputs = Dict[int, List[int]]  # sentence id -> greedy output token ids, EOS included


class OracleDrafter(Drafter):
    """Drafts each row's greedy continuation, found by the row's source sentence.

    targets: source token ids (pad removed, EOS included) -> greedy output (1-D long tensor
    on the decoding device, EOS included).  Unknown sources are a PluginError.
    """

    def __init__(self, targets: Dict[Tuple[int, ...], Tensor], src_pad: int, tgt_pad: int):
        self.targets, self.src_pad, self.tgt_pad = targets, src_pad, tgt_pad
        self.outputs = None  # (B, W + 1) greedy outputs of the active rows, pad after (at least one pad)

    def start(self, batch: BatchStart):
        rows = []
        for source in batch.src_tokens.tolist():
            key = tuple(t for t in source if t != self.src_pad)
            if key not in self.targets:
                raise PluginError("oracle: no greedy output for a source sentence of this batch "
                                  "(the oracle only decodes the sentences whose beam1 output it was given)")
            rows.append(self.targets[key])
        width = max(len(row) for row in rows) + 1
        outputs = rows[0].new_full((len(rows), width), self.tgt_pad)
        for i, row in enumerate(rows):
            outputs[i, : len(row)] = row
        self.outputs = outputs

    def propose(self, tokens: Tensor, lengths: Tensor, k: int) -> Tensor:
        """(B, k): greedy tokens ``lengths - 1`` .. ``lengths + k - 2`` of each row (the
        ``lengths - 1`` output tokens so far are its first ones), pad past its end."""
        columns = (lengths - 1).unsqueeze(1) + torch.arange(k, device=lengths.device).unsqueeze(0)
        return self.outputs.gather(1, columns.clamp(max=self.outputs.size(1) - 1))

    def keep_rows(self, rows: Tensor):
        self.outputs = self.outputs[rows]


def oracle_targets(engine, greedy: GreedyOutputs) -> Dict[Tuple[int, ...], Tensor]:
    """The oracle's table: each sentence's source ids -> its greedy output (a tensor on the
    engine's device).  Identical sources share one entry (greedy decodes them alike)."""
    return {tuple(engine.dataset[i]["source"].tolist()): torch.tensor(tokens, device=engine.device)
            for i, tokens in greedy.items()}


def build_oracle(engine, spec):
    """The ``oracle`` generator (a ``SpeculativeGenerator``, fixed draft length k, lossless
    acceptance, fairseq's length options from ``engine.cfg.generation``) and its drafter,
    whose ``targets`` are set per batch size before decoding."""
    from fairseq_plugins.decoding.builder import build_speculative
    from fairseq_plugins.decoding.options import DraftLengthOptions

    block_size = spec.options.get("block_size", ORACLE_BLOCK_SIZE)
    drafter = OracleDrafter({}, engine.src_dict.pad(), engine.tgt_dict.pad())
    opts = DraftLengthOptions(block_size=block_size, draft_length="fixed",
                              verifier_matmul=spec.options.get("verifier_matmul", "auto"))
    engine.cfg.generation.beam = 1
    generator = build_speculative(engine.task, engine.models, engine.cfg.generation, "oracle", drafter, opts,
                                  block_size)
    return generator, drafter


class TeacherForcedBound:
    """The ``bound`` row: per batch, the verifier's encoder and ONE block through its lean cache over the greedy
    output, on the ``greedy`` decoder's generator (``decoding.greedy``: the products, encoder and verifier cache
    every plugin decoder runs, ``--verifier-matmul`` as given): what a decoder whose every draft were right
    would still pay, so no drafting row (``oracle`` included) can beat it on the same arithmetic."""

    def __init__(self, engine, options: Optional[dict] = None):
        from fairseq_plugins.bench.decoders import DecoderSpec

        if len(engine.models) != 1:
            raise PluginError(f"bound: one verifier model expected, got an ensemble of {len(engine.models)}")
        self.generator = engine.build_generator(DecoderSpec("bound", "greedy", options=dict(options or {})), None)
        self.tgt_dict = engine.tgt_dict

    def batches(self, batches: List[Batch], greedy: GreedyOutputs) -> List[Batch]:
        """The same batches with the verifier's block (B, T): EOS + greedy output without its final EOS,
        right-padded, on the source's device (built here, outside the clock)."""
        from fairseq.data import data_utils

        eos, pad = self.tgt_dict.eos(), self.tgt_dict.pad()
        bound = []
        for batch in batches:
            net_input = batch.payload["net_input"]
            src_tokens = net_input["src_tokens"]
            inputs = [torch.tensor([eos, *greedy[i][:-1]]) for i in batch.ids]
            block = data_utils.collate_tokens(inputs, pad, eos, left_pad=False).to(src_tokens.device)
            bound.append(Batch(batch.ids, (src_tokens, net_input["src_lengths"], block)))
        return bound

    def runner(self) -> Callable[[Batch], Tensor]:
        """``run(batch)``: the timed call, the verifier's log-probs (B, T, V) after each prefix of the block."""
        from fairseq_plugins.decoding.fast_encoder import encoder_function

        generator = self.generator

        def run(batch: Batch) -> Tensor:
            src_tokens, src_lengths, block = batch.payload
            with torch.inference_mode():  # as the core decodes
                encode = encoder_function(generator.verifier.encoder, generator.verifier_linear, generator.built)
                encoder_out = encode(src_tokens, src_lengths=src_lengths)
                cache = generator.cache_factory(generator.verifier, encoder_out, src_tokens.size(0), src_tokens.device,
                                                linear=generator.verifier_linear, built=generator.built)
                return cache.forward_block(block)[0]

        return run

    def outputs(self, greedy: GreedyOutputs) -> Callable[[object, Batch], List[Output]]:
        """``convert(raw, batch)``: each sentence's greedy output, produced in 1 iteration."""
        eos = self.tgt_dict.eos()

        def convert(raw, batch: Batch) -> List[Output]:
            return [Output([self.tgt_dict[t] for t in greedy[i] if t != eos], 1, len(greedy[i]), list(greedy[i]))
                    for i in batch.ids]

        return convert
