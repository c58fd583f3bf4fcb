"""The timing rounds every harness uses (``bench.rounds``): rows take turns on interleaved
chunks of the batches, warm up on each chunk, replay the greedy outputs of the same chunk, and a
failing optional row is dropped while any other failure stops the run."""
import pytest

from fairseq_plugins.bench.rounds import Row, interleaved_chunks, round_ratios, time_in_rounds
from fairseq_plugins.bench.timing import Batch, Output


def batches(n_sentences, per_batch=1):
    ids = list(range(n_sentences))
    return [Batch(ids[s: s + per_batch], None) for s in range(0, n_sentences, per_batch)]


@pytest.mark.parametrize("n, rounds", [(10, 3), (10, 10), (4, 10), (7, 1)])
def test_chunks_interleave_and_cover_every_batch_once(n, rounds):
    given = batches(n)
    chunks = interleaved_chunks(given, rounds)
    assert len(chunks) == min(n, rounds)
    assert sorted(b.ids[0] for chunk in chunks for b in chunk) == list(range(n))
    for r, chunk in enumerate(chunks):
        assert [b.ids[0] for b in chunk] == list(range(r, n, len(chunks)))


def recording_row(label, log, given, **kwargs):
    """A row whose run logs (label, first sentence id) and outputs token [id]."""
    def run(batch):
        log.append((label, batch.ids[0]))
        return batch.ids

    def convert(raw, batch):
        return [Output([str(i)], tokens=[i, 2]) for i in raw]

    return Row(label, "fake", run, convert, given, **kwargs)


def test_rows_take_turns_and_warm_up_on_each_chunk():
    log, given = [], batches(9)
    rows = [recording_row("greedy", log, given, is_greedy=True), recording_row("other", log, given)]
    timed = time_in_rounds(rows, rounds=3, warmup=2, device="cpu")
    # round 1: warm-up (2 sentences: 0, 3) then the chunk (0, 3, 6), row after row; rounds 2 and 3 warm up on
    # their chunk's first batch only
    assert log == [("greedy", 0), ("greedy", 3), ("greedy", 0), ("greedy", 3), ("greedy", 6),
                   ("other", 0), ("other", 3), ("other", 0), ("other", 3), ("other", 6),
                   ("greedy", 1), ("greedy", 1), ("greedy", 4), ("greedy", 7),
                   ("other", 1), ("other", 1), ("other", 4), ("other", 7),
                   ("greedy", 2), ("greedy", 2), ("greedy", 5), ("greedy", 8),
                   ("other", 2), ("other", 2), ("other", 5), ("other", 8)]
    for row in rows:
        found = timed[row.key]
        assert sorted(found.results) == list(range(9)) and len(found.round_s) == 3
        assert sum(found.round_s) == pytest.approx(sum(found.results[b.ids[0]].latency_s for b in given))


def test_replaying_rows_get_the_greedy_outputs_of_their_chunk():
    log, given, seen = [], batches(6, per_batch=2), []

    def replay(chunk, greedy):
        seen.append(sorted(greedy))
        assert all(i in greedy for batch in chunk for i in batch.ids)
        return chunk, lambda raw, batch: [Output(["x"]) for _ in batch.ids]

    rows = [recording_row("greedy", log, given, is_greedy=True), recording_row("oracle", log, given, replay=replay)]
    time_in_rounds(rows, rounds=3, warmup=0, device="cpu")
    assert seen == [[0, 1], [0, 1, 2, 3], [0, 1, 2, 3, 4, 5]]


def test_a_failing_optional_row_is_dropped_and_any_other_failure_stops_the_run():
    log, given, told = [], batches(4), []

    def broken(batch):
        if batch.ids[0] == 1:
            raise RuntimeError("engine fell over")
        return batch.ids

    fragile = recording_row("fragile", log, given, optional=True)
    fragile.run = broken
    rows = [recording_row("greedy", log, given, is_greedy=True), fragile]
    timed = time_in_rounds(rows, rounds=2, warmup=0, device="cpu",
                           on_failure=lambda row, error: told.append((row.label, str(error))))
    assert list(timed) == [("greedy", "fake")] and told == [("fragile", "engine fell over")]
    assert sorted(timed["greedy", "fake"].results) == [0, 1, 2, 3]
    fragile.optional = False
    with pytest.raises(RuntimeError, match="engine fell over"):
        time_in_rounds(rows, rounds=2, warmup=0, device="cpu")


def test_round_ratios_are_baseline_over_row():
    assert round_ratios([2.0, 3.0], [1.0, 6.0]) == [2.0, 0.5]
