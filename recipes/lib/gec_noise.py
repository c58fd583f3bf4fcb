"""Synthetic grammatical-error noise for clean English text (stdin -> stdout), seeded.

Each token is left alone or hit by one of: function-word deletion, function-word
substitution (a/an/the, in/on/at, is/are, ...), adjacent swap, morphological change
(plural/verb endings) and typos (character drop/duplicate/swap/replace). A fraction of
sentences stays clean, so the model also learns to copy (as real GEC data does).

    python recipes/lib/gec_noise.py --seed 1 < clean.txt > noisy.txt
"""
import argparse
import random
import sys

CONFUSION_SETS = [
    ["a", "an", "the", ""], ["in", "on", "at", "into", "to"], ["is", "are", "was", "were", "be"],
    ["has", "have", "had"], ["do", "does", "did"], ["of", "for", "from", "with", "by"],
    ["this", "these", "that", "those"], ["it", "its", "they", "their"], ["some", "any", "many", "much"],
    ["while", "when", "as"], ["and", "or", "but"],
]
CONFUSABLE = {w: group for group in CONFUSION_SETS for w in group if w}
DROPPABLE = {"a", "an", "the", "is", "are", "of", "to", "in", "on", "at", "for", "with", "and", "some"}
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def match_case(new, old):
    if old[:1].isupper() and new:
        return new[0].upper() + new[1:]
    return new


def morph(word, rng):
    """Plural/verb-ending noise: dogs->dog, walk->walks, playing->play, walked->walk."""
    for suffix, repl in (("ing", ["", "s", "ed"]), ("ed", ["", "s", "ing"]), ("es", [""]), ("s", [""])):
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            return word[: -len(suffix)] + rng.choice(repl)
    return word + rng.choice(["s", "ed", "ing"]) if word.isalpha() and len(word) > 2 else word


def typo(word, rng):
    if len(word) < 3 or not word.isalpha():
        return word
    i = rng.randrange(len(word) - 1)
    kind = rng.randrange(4)
    if kind == 0:
        return word[:i] + word[i + 1:]                        # drop
    if kind == 1:
        return word[:i] + word[i] + word[i:]                  # duplicate
    if kind == 2:
        return word[:i] + word[i + 1] + word[i] + word[i + 2:]  # swap
    return word[:i] + rng.choice(LETTERS) + word[i + 1:]      # replace


def add_noise(sentence, rng, p_token=0.12, p_clean=0.1):
    tokens = sentence.split()
    if not tokens or rng.random() < p_clean:
        return " ".join(tokens)
    out, i = [], 0
    while i < len(tokens):
        tok, low = tokens[i], tokens[i].lower()
        if rng.random() >= p_token:
            out.append(tok)
        else:
            op = rng.random()
            if op < 0.2 and low in DROPPABLE:
                pass                                                  # deletion
            elif op < 0.45 and low in CONFUSABLE:
                new = rng.choice([w for w in CONFUSABLE[low] if w != low])
                if new:
                    out.append(match_case(new, tok))
            elif op < 0.6 and i + 1 < len(tokens):
                out.extend([tokens[i + 1], tok])                      # adjacent swap
                i += 1
            elif op < 0.8:
                out.append(morph(tok, rng))
            else:
                out.append(typo(tok, rng))
        i += 1
    if out and out[-1] == "." and rng.random() < 0.2:
        out.pop()                                                     # missing final period
    return " ".join(out) if out else " ".join(tokens)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--p-token", type=float, default=0.12, help="chance a token is corrupted")
    parser.add_argument("--p-clean", type=float, default=0.1, help="chance a sentence is left clean")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    for line in sys.stdin:
        sys.stdout.write(add_noise(line.strip(), rng, args.p_token, args.p_clean) + "\n")


if __name__ == "__main__":
    main()
