"""More sources for the drafter to learn the verifier on (issue 12: the drafter overfits its 29,000 sources).

Makes new English sources from the training sources by context-matched word substitution: a word is replaced
by another word seen between the same left and right neighbours somewhere in the corpus ("a [dog] runs" ->
"a [man] runs"), one or two substitutions a sentence, so the new sources stay caption-like.  The verifier's
greedy translations of them (``recipes/distill.sh``) are then more of exactly what lossless SpecDec accepts.

    python docs/experiments/augment_sources.py RAW_TRAIN.en SPM_MODEL OUT_DIR [COPIES] [SEED]

Writes OUT_DIR/train.en (SentencePiece pieces, as recipes/data writes them), OUT_DIR/train.de (a copy of the
sources: distill.sh wants a target file; REFERENCE_FALLBACK=0 never reads it) and OUT_DIR/train.raw.en.
Sources equal to a training source or to an earlier new one are dropped.
"""
import collections
import os
import random
import sys

import sentencepiece

BOUNDARY = "<s>"


def context_index(sentences):
    """(left, right) neighbours -> Counter of the words seen between them."""
    index = collections.defaultdict(collections.Counter)
    for words in sentences:
        padded = [BOUNDARY] + words + [BOUNDARY]
        for i in range(1, len(padded) - 1):
            index[padded[i - 1], padded[i + 1]][padded[i]] += 1
    return index


def substitute(words, index, rng, max_substitutions=2):
    """A copy of ``words`` with 1..max_substitutions words replaced by context-matched ones (None if none fits)."""
    out = list(words)
    positions = list(range(len(words)))
    rng.shuffle(positions)
    wanted, done = rng.randint(1, max_substitutions), 0
    for i in positions:
        if done == wanted:
            break
        left = out[i - 1] if i > 0 else BOUNDARY
        right = out[i + 1] if i + 1 < len(out) else BOUNDARY
        others = [(w, c) for w, c in index[left, right].items() if w != out[i]]
        if not others:
            continue
        candidates, weights = zip(*others)
        out[i] = rng.choices(candidates, weights=weights)[0]
        done += 1
    return out if done else None


def main():
    raw_train, spm_model, out_dir = sys.argv[1:4]
    copies = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    rng = random.Random(int(sys.argv[5]) if len(sys.argv) > 5 else 1)
    lines = open(raw_train, encoding="utf-8").read().splitlines()
    sentences = [line.split() for line in lines]
    index = context_index(sentences)
    seen, new = set(lines), []
    for _ in range(copies):
        for words in sentences:
            changed = substitute(words, index, rng)
            line = " ".join(changed) if changed else None
            if line and line not in seen:
                seen.add(line)
                new.append(line)
    os.makedirs(out_dir, exist_ok=True)
    processor = sentencepiece.SentencePieceProcessor(model_file=spm_model)
    with open(f"{out_dir}/train.raw.en", "w", encoding="utf-8") as raw, \
            open(f"{out_dir}/train.en", "w", encoding="utf-8") as src, \
            open(f"{out_dir}/train.de", "w", encoding="utf-8") as tgt:
        for line in new:
            pieces = " ".join(processor.encode(line, out_type=str))
            raw.write(line + "\n")
            src.write(pieces + "\n")
            tgt.write(pieces + "\n")
    print(f"{len(new)} new sources from {len(lines)} ({copies} copies asked) in {out_dir}")


if __name__ == "__main__":
    main()
