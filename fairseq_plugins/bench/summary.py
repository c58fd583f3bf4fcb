"""From timed sentences to a benchmark row: latency percentiles, iterations, accepted
tokens per iteration, BLEU, mismatches against the greedy rows and speedups against the baselines."""
import statistics
from typing import Callable, Dict, List, Optional

from fairseq_plugins.bench.rounds import round_ratios
from fairseq_plugins.bench.timing import SentenceResult, percentile

GREEDY, BEAM5 = "beam1", "beam5"  # the baseline rows' labels: fairseq's own greedy search and beam 5
GREEDY_DECODER = "greedy"  # the plugin's greedy decoder: the lean verifier, nothing drafted
BASELINES = (("greedy", GREEDY), ("greedy_decoder", GREEDY_DECODER), ("beam5", BEAM5))  # key infix, row label
ROW_KEYS = ("decoder", "engine", "batch_size")


def bleu(hypotheses: List[str], references: Optional[List[str]]) -> Optional[float]:
    """sacreBLEU (default 13a tokenization) of detokenized text, unrounded (the tables round it, the
    JSON keeps it, so that a difference such as -1.0005 is not read as -1.00); None without references."""
    if references is None:
        return None
    import sacrebleu

    return sacrebleu.corpus_bleu(hypotheses, [references]).score


def iteration_stats(results: Dict[int, SentenceResult]) -> Dict[str, object]:
    """Mean iterations per sentence and tokens per iteration (None when not known)."""
    outputs = [r.output for r in results.values()]
    if not outputs or any(o.steps is None for o in outputs):
        return {"mean_iterations": None, "tokens_per_iteration": None}
    steps = sum(o.steps for o in outputs)
    return {"mean_iterations": steps / len(outputs),
            "tokens_per_iteration": sum(o.accepted for o in outputs) / max(1, steps)}


def summarize(label: str, engine: str, batch_size: int, results: Dict[int, SentenceResult],
              batch_seconds: List[float], detokenize: Callable[[str], str],
              references: Optional[Dict[int, str]],
              score: Optional[Callable[[List[int], List[str]], float]] = None) -> Dict[str, object]:
    """One row (sentences in id order); ``score(ids, texts)``: the task's score of the detokenized outputs
    (``bench.task_score``), else the row's score is its BLEU."""
    ids = sorted(results)
    latencies = [results[i].latency_s * 1000.0 for i in ids]
    texts = [detokenize(" ".join(results[i].output.symbols)) for i in ids]
    row = {
        "decoder": label, "engine": engine, "batch_size": batch_size, "sentences": len(ids),
        "median_ms": statistics.median(latencies), "p90_ms": percentile(latencies, 90),
        "mean_ms": statistics.fmean(latencies), "total_s": sum(batch_seconds),
        "sentences_per_s": len(ids) / sum(batch_seconds) if sum(batch_seconds) > 0 else None,
        **iteration_stats(results),
        "bleu": bleu(texts, [references[i] for i in ids] if references is not None else None),
        "latencies_ms": latencies,
        "iterations": [results[i].output.steps for i in ids],
        "output_lengths": [len(results[i].output.symbols) for i in ids],  # tokens, EOS excluded
        "ids": ids,
        "outputs": texts,  # detokenized, in id order
    }
    row["score"] = score(ids, texts) if score is not None else row["bleu"]
    return row


def _ratio(baseline: Optional[float], value: Optional[float]) -> Optional[float]:
    if baseline is None or not value:
        return None
    return baseline / value


def _find(rows: List[dict], label: str, batch_size: int) -> Optional[dict]:
    for row in rows:
        if row["decoder"] == label and row["engine"] == "fairseq" and row["batch_size"] == batch_size:
            return row
    return None


def mismatches(symbols: Dict[int, List[str]], greedy: Optional[Dict[int, List[str]]]) -> Optional[int]:
    """Sentences whose output differs from greedy's (None without a greedy run)."""
    if greedy is None:
        return None
    return sum(1 for i, out in symbols.items() if greedy.get(i) != out)


def add_comparisons(rows: List[dict], outputs: Dict[tuple, Dict[int, List[str]]]):
    """Speedups (same batch size; median and total time) vs stock greedy (``beam1``: keys ``*_vs_greedy_*``),
    vs the plugin's ``greedy`` decoder (the lean verifier decoding greedily: ``*_vs_greedy_decoder_*``) and vs
    beam-5, and the counts of outputs differing from each greedy.  A row of another model (``row["model"]``:
    the harness's ``--model NAME``) is timed against the same baselines but compared, output for output, with
    that model's own greedy rows (``beam1:model=NAME``, ``greedy:model=NAME``).  ``outputs``: row key -> id ->
    symbols."""
    for row in rows:
        bs = row["batch_size"]
        for name, label in BASELINES:
            base = _find(rows, label, bs)
            row[f"speedup_vs_{name}_median"] = _ratio(base and base["median_ms"], row["median_ms"])
            row[f"speedup_vs_{name}_total"] = _ratio(base and base["total_s"], row["total_s"])
            if name != "beam5":
                row[f"speedup_vs_{name}_rounds"] = round_range(base, row)
                same = _find(rows, f"{label}:model={row['model']}", bs) if row.get("model") else base
                base_out = outputs.get(row_key(same)) if same else None
                row[f"mismatches_vs_{name}"] = mismatches(outputs[row_key(row)], base_out)


def round_range(base: Optional[dict], row: dict) -> Optional[List[float]]:
    """[lowest, highest] per-round total speedup of ``row`` over ``base`` (``bench.rounds``);
    None without ``base`` or with a single round."""
    if base is None or len(row.get("round_s") or []) < 2 or len(base.get("round_s") or []) != len(row["round_s"]):
        return None
    ratios = round_ratios(base["round_s"], row["round_s"])
    return [min(ratios), max(ratios)] if ratios else None


def row_key(row: dict) -> tuple:
    return tuple(row[k] for k in ROW_KEYS)
