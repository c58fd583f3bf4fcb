"""More training sources for a drafter: context-matched word substitutions of the given sources.

A drafter learns the verifier's translations of its training sources and overfits them (Multi30k: 4.03
accepted tokens per iteration on its own sources, 3.22 on test2016).  New sources made by replacing a word
with another word seen between the same left and right neighbours somewhere in the corpus ("a [dog] runs" ->
"a [man] runs"), one or two a sentence, stay close to the domain; the teacher's translations of them
(``recipes/distill.sh`` with ``MORE_SOURCES``) are more of what the drafter must learn.

    python -m fairseq_plugins.scripts.augment_sources train.en more.en --copies 2 --seed 1

Works on any tokenization: a SentencePiece piece starting with "▁" begins a word, a subword-nmt piece ending
with "@@" continues into the next one, other tokens are words; the output keeps the input's segmentation.
New sources equal to an input line or to an earlier new one are dropped.
"""
import argparse
import collections
import random
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from fairseq_plugins_compat.errors import PluginError, exit_on_plugin_error

Word = Tuple[str, ...]  # the tokens of one word
BOUNDARY: Word = ("<s>",)


def words_of(line: str) -> List[Word]:
    """Group a line's tokens into words (SentencePiece "▁", subword-nmt "@@" or whitespace words)."""
    tokens = line.split()
    sentencepiece = any(token.startswith("▁") for token in tokens)
    words: List[List[str]] = []
    continues = False
    for token in tokens:
        if words and (continues or (sentencepiece and not token.startswith("▁"))):
            words[-1].append(token)
        else:
            words.append([token])
        continues = token.endswith("@@")
    return [tuple(word) for word in words]


def line_of(words: List[Word]) -> str:
    """The line of ``words``, tokens separated by spaces (the inverse of :func:`words_of`)."""
    return " ".join(token for word in words for token in word)


def context_index(sentences: Sequence[List[Word]]) -> Dict[Tuple[Word, Word], collections.Counter]:
    """(left word, right word) -> Counter of the words seen between them."""
    index: Dict[Tuple[Word, Word], collections.Counter] = collections.defaultdict(collections.Counter)
    for words in sentences:
        padded = [BOUNDARY, *words, BOUNDARY]
        for i in range(1, len(padded) - 1):
            index[padded[i - 1], padded[i + 1]][padded[i]] += 1
    return index


def substitute(words: List[Word], index, rng: random.Random, max_substitutions: int = 2) -> Optional[List[Word]]:
    """A copy of ``words`` with 1..max_substitutions words replaced by context-matched ones; None if none fits."""
    out = list(words)
    positions = list(range(len(words)))
    rng.shuffle(positions)
    wanted, done = rng.randint(1, max_substitutions), 0
    for i in positions:
        if done == wanted:
            break
        left = out[i - 1] if i > 0 else BOUNDARY
        right = out[i + 1] if i + 1 < len(out) else BOUNDARY
        others = [(word, count) for word, count in index.get((left, right), {}).items() if word != out[i]]
        if not others:
            continue
        candidates, weights = zip(*others)
        out[i] = rng.choices(candidates, weights=weights)[0]
        done += 1
    return out if done else None


def augment(lines: Sequence[str], copies: int = 2, seed: int = 1, max_substitutions: int = 2) -> List[str]:
    """New source lines: ``copies`` passes over ``lines``, each line substituted once per pass."""
    rng = random.Random(seed)
    sentences = [words_of(line) for line in lines]
    index = context_index(sentences)
    seen = {line_of(words) for words in sentences}
    new = []
    for _ in range(copies):
        for words in sentences:
            changed = substitute(words, index, rng, max_substitutions)
            line = line_of(changed) if changed else None
            if line and line not in seen:
                seen.add(line)
                new.append(line)
    return new


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m fairseq_plugins.scripts.augment_sources",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("input", help="source lines, one sentence a line, tokenized as the training data")
    parser.add_argument("output", help="where the new source lines go")
    parser.add_argument("--copies", type=int, default=2, help="passes over the input, one new line per line each (default 2)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("--max-substitutions", type=int, default=2, help="words replaced per new line, at most (default 2)")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = get_parser().parse_args(argv)
    if args.copies < 1 or args.max_substitutions < 1:
        raise PluginError("--copies and --max-substitutions must be at least 1")
    try:
        with open(args.input, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise PluginError(f"cannot read {args.input}: {e.strerror}")
    new = augment(lines, args.copies, args.seed, args.max_substitutions)
    with open(args.output, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in new)
    print(f"augment_sources: {len(new)} new sources from {len(lines)} lines ({args.copies} passes) -> {args.output}",
          file=sys.stderr)
    return 0


def cli_main():
    exit_on_plugin_error(main, "augment_sources")


if __name__ == "__main__":
    cli_main()
