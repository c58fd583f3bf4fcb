"""A relaxed acceptance rule (SpecDec++'s --beta/--tau) at several sentences a batch on a CPU drafts and verifies a
whole block for every row in every iteration: the core says so once, in one line, and only then."""
import logging

import pytest

from fairseq_plugins.decoding.core import SpeculativeConfig, SpeculativeGenerator
from fairseq_plugins.decoding.greedy import NoDrafts
from tiny_models import build_transformer, make_batch, make_dictionary

DICT = make_dictionary(12)


def batch_warnings(caplog, beta, tau, batches):
    model = build_transformer(DICT, seed=0, eos_boost=1.0)
    cfg = SpeculativeConfig(block_size=3, beta=beta, tau=tau, max_len_b=10)
    generator = SpeculativeGenerator(model, DICT, NoDrafts(), cfg, name="specdec++")
    with caplog.at_level(logging.WARNING, logger="fairseq_plugins.decoding.core"):
        for seed, lengths in enumerate(batches):
            generator.generate([model], make_batch(DICT, lengths, seed=seed))
    return [record.getMessage() for record in caplog.records if "a batch on a CPU" in record.getMessage()]


def test_relaxed_rule_warns_once_about_batches_on_a_cpu(caplog):
    warnings = batch_warnings(caplog, beta=3, tau=1.0, batches=[[4], [4, 6], [5, 2, 7]])
    assert len(warnings) == 1
    assert warnings[0].startswith("specdec++: 2 sentences a batch on a CPU") and "--batch-size 1" in warnings[0]


@pytest.mark.parametrize("beta, tau, batches", [(3, 1.0, [[4], [6]]), (1, 0.0, [[4, 6], [5, 2, 7]])],
                         ids=["relaxed-batch-1", "lossless"])
def test_no_warning_at_batch_1_or_when_lossless(caplog, beta, tau, batches):
    assert batch_warnings(caplog, beta, tau, batches) == []
