"""Token repetition ratio (SpecDec paper, Table 9; GAD paper, Appendix B).

The share of tokens identical to the token just before them, over all tokens of all
hypotheses: the usual proxy for the multi-modality problem of NAT models (an AT model's
greedy output has about 0.2% on WMT14 en-de; a 4-iteration CMLM about 1.1%).

    python -m fairseq_plugins.bench.repetition hyps.txt              # one hypothesis per line
    python -m fairseq_plugins.bench.repetition gen.out --fairseq     # H- lines of fairseq-generate
    python -m fairseq_plugins.bench.repetition hyps.txt --unit subword  # keep '@@ ' pieces

Tokens are whitespace-separated; by default subword-nmt joins ('@@ ') are undone first, so
the ratio is over words of the (tokenized) output, as reported in the papers.
"""
import argparse
import json
import sys
from typing import Iterable, List, Sequence, Tuple


def count_repetitions(tokens: Sequence[str]) -> int:
    """Number of positions i > 0 with ``tokens[i] == tokens[i - 1]``."""
    return sum(1 for prev, cur in zip(tokens, tokens[1:]) if prev == cur)


def tokenize(line: str, unit: str = "word") -> List[str]:
    """Whitespace tokens; ``unit='word'`` first joins subword-nmt pieces (``'@@ '``)."""
    if unit == "word":
        line = (line.rstrip("\n") + " ").replace("@@ ", "")
    return line.split()


def repetition_stats(lines: Iterable[str], unit: str = "word") -> Tuple[int, int]:
    """(repeated tokens, total tokens) over all lines."""
    repeats = total = 0
    for line in lines:
        tokens = tokenize(line, unit)
        repeats += count_repetitions(tokens)
        total += len(tokens)
    return repeats, total


def repetition_ratio(lines: Iterable[str], unit: str = "word") -> float:
    """Repeated tokens / all tokens (0.0 for empty input)."""
    repeats, total = repetition_stats(lines, unit)
    return repeats / total if total else 0.0


def fairseq_hypotheses(lines: Iterable[str]) -> List[str]:
    """Hypothesis texts of fairseq-generate output (``H-<id>\\t<score>\\t<text>``), in id order."""
    hyps = []
    for line in lines:
        if line.startswith("H-"):
            ident, _score, text = (line.rstrip("\n").split("\t", 2) + [""])[:3]
            hyps.append((int(ident[2:]), text))
    return [text for _, text in sorted(hyps, key=lambda pair: pair[0])]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", nargs="?", default="-", help="file ('-': stdin)")
    parser.add_argument("--fairseq", action="store_true", help="input is fairseq-generate output (H- lines)")
    parser.add_argument("--unit", choices=["word", "subword"], default="word")
    parser.add_argument("--json", action="store_true", help="print a JSON object instead of a line")
    args = parser.parse_args(argv)
    stream = sys.stdin if args.input == "-" else open(args.input, encoding="utf-8")
    with stream:
        lines = fairseq_hypotheses(stream) if args.fairseq else list(stream)
    repeats, total = repetition_stats(lines, args.unit)
    ratio = repeats / total if total else 0.0
    if args.json:
        print(json.dumps({"repetition_ratio": ratio, "repeated": repeats, "tokens": total,
                          "sentences": len(lines), "unit": args.unit}))
    else:
        print(f"repetition ratio {100 * ratio:.2f}% ({repeats} of {total} {args.unit} tokens, {len(lines)} sentences)")


if __name__ == "__main__":
    main()
