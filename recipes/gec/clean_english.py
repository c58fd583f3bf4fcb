"""Clean English sentences for synthetic GEC data, tokenized as the GEC test sets are, split train/valid.

    python recipes/gec/clean_english.py --data-dir ../shared/data --out-dir OUT \
        --exclude jfleg/dev/dev.src ... [--valid-size 2000] [--sources multi30k,wmt,...]

Reads what exists of (paths under --data-dir, each source's folder overridable):
  multi30k  raw/{train,val}.en                      image captions
  wmt       en-de/newstest201{3,4}.en, en-ro/*.en   news
  iwslt14   orig/de-en/*.en.xml (<seg> lines)       TED talks, cased
  scitldr   SciTLDR-A/*.jsonl (abstract sentences and TL;DRs)
  asset     asset.*.orig and asset.*.simp.*         Wikipedia sentences and their simplifications
Sentences are tokenized (Moses, then "do n't" / "ca n't" as in JFLEG and CoNLL), kept at 3 to MAX_WORDS
tokens, deduplicated, and dropped when equal to a line of an --exclude file (the test sets). A seeded shuffle
puts VALID_SIZE of them in OUT/clean.valid, the rest in OUT/clean.train; OUT/clean.sources counts each source.
"""
import argparse
import glob
import html
import json
import os
import random
import re
import sys
from typing import Dict, Iterable, Iterator, List

SOURCES = ("multi30k", "wmt", "iwslt14", "scitldr", "asset")
SEG = re.compile(r"<seg[^>]*>(.*)</seg>")
NOT = re.compile(r"(\w)n 't\b")


def read(path: str) -> Iterator[str]:
    with open(path, encoding="utf-8") as f:
        for line in f:
            yield line.strip()


def multi30k(root: str) -> Iterator[str]:
    for name in ("train.en", "val.en"):
        path = os.path.join(root, "raw", name)
        if os.path.exists(path):
            yield from read(path)


def wmt(root: str) -> Iterator[str]:
    for path in sorted(glob.glob(os.path.join(root, "en-*", "*.en"))):
        yield from read(path)


def iwslt14(root: str) -> Iterator[str]:
    for path in sorted(glob.glob(os.path.join(root, "orig", "*", "*.en.xml"))):
        for line in read(path):
            match = SEG.search(line)
            if match:
                yield html.unescape(match.group(1).strip())


def scitldr(root: str) -> Iterator[str]:
    for path in sorted(glob.glob(os.path.join(root, "SciTLDR-A", "*.jsonl"))):
        for line in read(path):
            if line:
                doc = json.loads(line)
                yield from doc.get("source", [])
                yield from doc.get("target", [])


def asset(root: str) -> Iterator[str]:
    for path in sorted(glob.glob(os.path.join(root, "asset.*.orig")) + glob.glob(os.path.join(root, "asset.*.simp.*"))):
        yield from read(path)


READERS = {"multi30k": multi30k, "wmt": wmt, "iwslt14": iwslt14, "scitldr": scitldr, "asset": asset}


class Tokenizer:
    """Moses English tokenization without escaping, contractions split as in the Penn Treebank ("do n't")."""

    def __init__(self):
        from sacremoses import MosesTokenizer

        self.moses = MosesTokenizer("en")

    def __call__(self, line: str) -> str:
        text = self.moses.tokenize(line, return_str=True, escape=False, aggressive_dash_splits=False)
        return NOT.sub(r"\1 n't", text)


def collect(roots: Dict[str, str], tokenize, exclude: Iterable[str], max_words: int) -> Dict[str, List[str]]:
    """source name -> its kept sentences (tokenized, new to every earlier source, not excluded)."""
    seen = set(exclude)
    kept: Dict[str, List[str]] = {}
    for name, root in roots.items():
        kept[name] = []
        for line in READERS[name](root):
            if not line:
                continue
            sentence = tokenize(line)
            if 3 <= len(sentence.split()) <= max_words and sentence not in seen:
                seen.add(sentence)
                kept[name].append(sentence)
    return kept


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", required=True, help="the shared data folder (one folder per source)")
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--sources", default=",".join(SOURCES), help="comma list of " + ", ".join(SOURCES))
    for name in SOURCES:
        parser.add_argument(f"--{name}-dir", help=f"{name} folder (default: <data-dir>/{name})")
    parser.add_argument("--exclude", nargs="*", default=[], help="files whose lines (stripped) never enter")
    parser.add_argument("--valid-size", type=int, default=2000)
    parser.add_argument("--max-words", type=int, default=80)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    roots = {}
    for name in args.sources.split(","):
        if name not in READERS:
            parser.error(f"unknown source {name!r} (known: {', '.join(SOURCES)})")
        root = getattr(args, f"{name}_dir") or os.path.join(args.data_dir, name)
        if os.path.isdir(root):
            roots[name] = root
        else:
            print(f"clean_english: no {name} at {root}: skipped", file=sys.stderr)
    exclude = [" ".join(line.split()) for path in args.exclude for line in read(path)]
    kept = collect(roots, Tokenizer(), exclude, args.max_words)
    sentences = [s for name in kept for s in kept[name]]
    if len(sentences) <= args.valid_size:
        sys.exit(f"clean_english: {len(sentences)} sentences, not more than --valid-size {args.valid_size}")
    random.Random(args.seed).shuffle(sentences)
    os.makedirs(args.out_dir, exist_ok=True)
    for split, rows in (("valid", sentences[:args.valid_size]), ("train", sentences[args.valid_size:])):
        with open(os.path.join(args.out_dir, f"clean.{split}"), "w", encoding="utf-8") as f:
            f.writelines(s + "\n" for s in rows)
    with open(os.path.join(args.out_dir, "clean.sources"), "w", encoding="utf-8") as f:
        f.writelines(f"{name}\t{len(rows)}\n" for name, rows in kept.items())
    print(f"clean_english: {len(sentences)} sentences ({', '.join(f'{n} {len(r)}' for n, r in kept.items())})",
          file=sys.stderr)


if __name__ == "__main__":
    main()
