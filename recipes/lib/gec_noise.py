"""Synthetic learner-like errors for clean, space-tokenized English (stdin -> stdout), seeded.

A sentence stays clean with chance ``--p-clean`` (the model must learn to copy); otherwise it gets
about ``--p-token`` errors per token (the rate varies between sentences by a factor of 0.25 to 1.75,
at least one error), each of a type drawn by ERROR_WEIGHTS: article, preposition, agreement (subject and
verb), verb form, noun number, spelling, word choice (their/there, then/than...), word order, missing
word, extra word, punctuation, casing.  Rules work on the surface words (no tagger), so a few errors
land where a learner would not make them.

    python recipes/lib/gec_noise.py --seed 1 < clean.tok.txt > noisy.tok.txt

Input and output are tokenized as the GEC test sets are ("do n't", "it 's", "word ,").
"""
import argparse
import random
import sys
from typing import Callable, Dict, List, Optional, Sequence, Tuple

ARTICLES = ("a", "an", "the")
PREPOSITIONS = ("in", "on", "at", "to", "for", "of", "with", "from", "by", "about", "into", "over", "under",
                "during", "since", "through", "among", "between")
AGREEMENT = {"is": "are", "are": "is", "was": "were", "were": "was", "has": "have", "have": "has",
             "does": "do", "do": "does", "this": "these", "these": "this", "that": "those", "those": "that",
             "much": "many", "many": "much", "it": "they", "they": "it"}
SINGULAR_SUBJECTS = ("he", "she", "it", "this", "that", "who", "everyone", "everybody", "nobody")
PLURAL_SUBJECTS = ("they", "we", "you", "i", "people", "these", "those")
MODALS = ("can", "could", "will", "would", "should", "must", "may", "might", "to")
IRREGULAR_VERBS = [  # base, past, participle (a learner's regularised past is added below)
    ("be", "was", "been"), ("go", "went", "gone"), ("take", "took", "taken"), ("make", "made", "made"),
    ("see", "saw", "seen"), ("have", "had", "had"), ("do", "did", "done"), ("get", "got", "gotten"),
    ("give", "gave", "given"), ("write", "wrote", "written"), ("come", "came", "come"), ("know", "knew", "known"),
    ("think", "thought", "thought"), ("find", "found", "found"), ("become", "became", "become"),
    ("begin", "began", "begun"), ("buy", "bought", "bought"), ("bring", "brought", "brought"),
    ("choose", "chose", "chosen"), ("eat", "ate", "eaten"), ("feel", "felt", "felt"), ("keep", "kept", "kept"),
    ("leave", "left", "left"), ("lose", "lost", "lost"), ("meet", "met", "met"), ("pay", "paid", "paid"),
    ("run", "ran", "run"), ("say", "said", "said"), ("sell", "sold", "sold"), ("send", "sent", "sent"),
    ("speak", "spoke", "spoken"), ("spend", "spent", "spent"), ("stand", "stood", "stood"),
    ("teach", "taught", "taught"), ("tell", "told", "told"), ("understand", "understood", "understood"),
    ("win", "won", "won"), ("grow", "grew", "grown"), ("hold", "held", "held"), ("sit", "sat", "sat"),
]
VERB_FORMS = {}
for _forms in IRREGULAR_VERBS:
    _base = _forms[0]
    _all = set(_forms) | {_base + "ed", _base + ("s" if not _base.endswith("s") else "es"), _base + "ing"}
    for _form in _forms:
        VERB_FORMS[_form] = sorted(_all - {_form})
IRREGULAR_NOUNS = {"man": "men", "woman": "women", "child": "children", "person": "people", "foot": "feet",
                   "tooth": "teeth", "mouse": "mice", "life": "lives", "wife": "wives", "knife": "knives"}
IRREGULAR_NOUNS.update({plural: singular for singular, plural in list(IRREGULAR_NOUNS.items())})
UNCOUNTABLE = ("information", "advice", "equipment", "furniture", "research", "knowledge", "homework",
               "evidence", "luggage", "news", "traffic", "work", "money", "water", "music")
SINGULAR_CUES = ("a", "an", "one", "every", "each", "this", "that", "another")
CONFUSED_WORDS = [("their", "there"), ("then", "than"), ("to", "too"), ("affect", "effect"), ("lose", "loose"),
                  ("your", "you 're"), ("were", "where"), ("quite", "quiet"), ("accept", "except"),
                  ("advice", "advise"), ("make", "do"), ("say", "tell"), ("few", "little"), ("less", "fewer"),
                  ("other", "another"), ("also", "too"), ("for", "since"), ("during", "while"),
                  ("although", "despite"), ("learn", "teach"), ("borrow", "lend"), ("rise", "raise"),
                  ("economic", "economical"), ("live", "life"), ("think", "thing"), ("though", "through"),
                  ("now", "know"), ("its", "it 's"), ("whether", "weather"), ("in", "on"), ("every", "all")]
CONFUSION = {}
for _a, _b in CONFUSED_WORDS:
    CONFUSION.setdefault(_a, []).append(_b)
    CONFUSION.setdefault(_b, []).append(_a)
FUNCTION_WORDS = ("the", "a", "to", "of", "is", "are", "be", "that", "it", "and", "in", "for", "will", "have",
                  "do", "there", "was", "on", "with", "as")
ADVERB_SUFFIX = "ly"
KEYBOARD_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
NEIGHBOURS = {}
for _row_i, _row in enumerate(KEYBOARD_ROWS):
    for _col, _ch in enumerate(_row):
        near = {_row[_col - 1] if _col else "", _row[_col + 1] if _col + 1 < len(_row) else ""}
        for _other in KEYBOARD_ROWS[max(0, _row_i - 1):_row_i + 2]:
            if _other is not _row:
                near |= set(_other[max(0, _col - 1):_col + 1])
        NEIGHBOURS[_ch] = "".join(sorted(near - {""}))
VOWELS = "aeiou"
PUNCTUATION = (",", ".", ";", ":", "!", "?")

Tokens = List[str]


def is_word(token: str) -> bool:
    return token.isalpha()


def match_case(new: str, old: str) -> str:
    """``new`` capitalised like ``old`` (first letter)."""
    if old[:1].isupper() and new:
        return new[0].upper() + new[1:]
    return new


def pick(rng: random.Random, positions: Sequence[int]) -> Optional[int]:
    return rng.choice(positions) if positions else None


def replace(tokens: Tokens, i: int, new: str) -> Tokens:
    """``tokens`` with token ``i`` replaced by ``new`` (which may hold several space-separated tokens)."""
    return tokens[:i] + new.split() + tokens[i + 1:]


# --- error types: each returns the changed tokens, or None where the sentence offers no place --------------

def article(tokens: Tokens, rng: random.Random) -> Optional[Tokens]:
    """Drop, swap (a/an/the) or insert an article."""
    at = pick(rng, [i for i, t in enumerate(tokens) if t.lower() in ARTICLES])
    roll = rng.random()
    if at is not None and roll < 0.5:
        return tokens[:at] + tokens[at + 1:]
    if at is not None and roll < 0.8:
        low = tokens[at].lower()
        new = rng.choice([a for a in ARTICLES if a != low])
        return replace(tokens, at, match_case(new, tokens[at]))
    spots = [i for i, t in enumerate(tokens) if t.islower() and is_word(t) and t not in ARTICLES and len(t) > 2
             and (i == 0 or tokens[i - 1].lower() not in ARTICLES)]
    at = pick(rng, spots)
    if at is None:
        return None
    return tokens[:at] + [rng.choice(("the", "a", "the"))] + tokens[at:]


def preposition(tokens: Tokens, rng: random.Random) -> Optional[Tokens]:
    """Swap (mostly) or drop a preposition."""
    at = pick(rng, [i for i, t in enumerate(tokens) if t.lower() in PREPOSITIONS])
    if at is None:
        return None
    if rng.random() < 0.25:
        return tokens[:at] + tokens[at + 1:]
    new = rng.choice([p for p in PREPOSITIONS[:10] if p != tokens[at].lower()])
    return replace(tokens, at, match_case(new, tokens[at]))


def third_person(verb: str) -> str:
    if verb.endswith(("s", "sh", "ch", "x", "o")):
        return verb + "es"
    if verb.endswith("y") and len(verb) > 2 and verb[-2] not in VOWELS:
        return verb[:-1] + "ies"
    return verb + "s"


def agreement(tokens: Tokens, rng: random.Random) -> Optional[Tokens]:
    """is/are, has/have, this/these...; a verb after he/she/it loses its -s, after they/we gains one."""
    spots = [i for i, t in enumerate(tokens) if t.lower() in AGREEMENT]
    for i in range(1, len(tokens)):
        prev, word = tokens[i - 1].lower(), tokens[i]
        if prev in SINGULAR_SUBJECTS and word.islower() and is_word(word) and word.endswith("s") \
                and not word.endswith("ss") and len(word) > 3:
            spots.append(i)
        elif prev in PLURAL_SUBJECTS and word.islower() and is_word(word) and not word.endswith("s") \
                and len(word) > 2 and word not in AGREEMENT and word not in MODALS:
            spots.append(i)
    at = pick(rng, spots)
    if at is None:
        return None
    word = tokens[at]
    if word.lower() in AGREEMENT:
        return replace(tokens, at, match_case(AGREEMENT[word.lower()], word))
    if word.endswith("ies") and len(word) > 4:
        return replace(tokens, at, word[:-3] + "y")
    if word.endswith("es") and word[:-2].endswith(("sh", "ch", "x", "ss")):
        return replace(tokens, at, word[:-2])
    if word.endswith("s"):
        return replace(tokens, at, word[:-1])
    return replace(tokens, at, third_person(word))


def regular_forms(word: str) -> List[str]:
    """Other forms of a regular verb seen as ``word`` (base, -s, -ed, -ing), from its ending."""
    if word.endswith("ing") and len(word) > 5:
        base = word[:-3]
    elif word.endswith("ed") and len(word) > 4:
        base = word[:-2]
    else:
        base = word
    forms = {base, base + "ed", base + "ing", third_person(base)}
    return sorted(forms - {word})


def verb_form(tokens: Tokens, rng: random.Random) -> Optional[Tokens]:
    """An irregular verb in another form (went -> goed, gone), a verb after a modal or "to" inflected,
    a verb in -ing/-ed in another form."""
    spots = [i for i, t in enumerate(tokens) if t.lower() in VERB_FORMS and t.lower() not in ("be", "have", "do")]
    for i, t in enumerate(tokens):
        if i and tokens[i - 1].lower() in MODALS and is_word(t) and t.islower() and len(t) > 2 \
                and t not in ARTICLES and t not in FUNCTION_WORDS:
            spots.append(i)
        elif is_word(t) and t.islower() and ((t.endswith("ing") and len(t) > 5) or (t.endswith("ed") and len(t) > 4)):
            spots.append(i)
    at = pick(rng, spots)
    if at is None:
        return None
    word = tokens[at].lower()
    forms = VERB_FORMS.get(word) or regular_forms(word)
    return replace(tokens, at, match_case(rng.choice(forms), tokens[at]))


def plural(noun: str) -> str:
    if noun in IRREGULAR_NOUNS:
        return IRREGULAR_NOUNS[noun]
    return third_person(noun)


def singular(noun: str) -> str:
    if noun in IRREGULAR_NOUNS:
        return IRREGULAR_NOUNS[noun]
    if noun.endswith("ies"):
        return noun[:-3] + "y"
    if noun.endswith(("shes", "ches", "xes", "sses")):
        return noun[:-2]
    return noun[:-1]


def noun_number(tokens: Tokens, rng: random.Random) -> Optional[Tokens]:
    """A plural made singular, a noun after a/one/this made plural, an uncountable noun given an -s."""
    spots = []
    for i, t in enumerate(tokens):
        low = t.lower()
        if not is_word(t) or not t.islower():
            continue
        if low in IRREGULAR_NOUNS or low in UNCOUNTABLE:
            spots.append(i)
        elif low.endswith("s") and not low.endswith(("ss", "us", "is", "ous")) and len(low) > 3:
            spots.append(i)
        elif i and tokens[i - 1].lower() in SINGULAR_CUES and len(low) > 2 and low not in FUNCTION_WORDS:
            spots.append(i)
    at = pick(rng, spots)
    if at is None:
        return None
    word = tokens[at]
    if word in UNCOUNTABLE:
        new = word + "s"
    elif word in IRREGULAR_NOUNS:
        new = IRREGULAR_NOUNS[word]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is", "ous")):
        new = singular(word)
    else:
        new = plural(word)
    return replace(tokens, at, new)


def misspell(word: str, rng: random.Random) -> str:
    """One learner-like typo: a letter dropped, doubled, swapped with the next, hit on a neighbouring key,
    a vowel confused, a double consonant made single."""
    i = rng.randrange(len(word) - 1)
    kind = rng.randrange(6)
    if kind == 0:
        return word[:i] + word[i + 1:]
    if kind == 1:
        return word[:i] + word[i] + word[i:]
    if kind == 2:
        return word[:i] + word[i + 1] + word[i] + word[i + 2:]
    if kind == 3:
        ch = word[i].lower()
        return word[:i] + rng.choice(NEIGHBOURS.get(ch) or VOWELS) + word[i + 1:]
    vowels = [j for j, ch in enumerate(word) if ch in VOWELS]
    doubles = [j for j in range(len(word) - 1) if word[j] == word[j + 1] and word[j] not in VOWELS]
    if kind == 4 and vowels:
        j = rng.choice(vowels)
        return word[:j] + rng.choice([v for v in VOWELS if v != word[j]]) + word[j + 1:]
    if doubles:
        j = rng.choice(doubles)
        return word[:j] + word[j + 1:]
    return word[:i] + word[i] + word[i:]


def spelling(tokens: Tokens, rng: random.Random) -> Optional[Tokens]:
    """A typo in a word of 4 letters or more (longer words more often)."""
    spots = [i for i, t in enumerate(tokens) if is_word(t) and len(t) >= 4]
    if not spots:
        return None
    at = rng.choices(spots, weights=[len(tokens[i]) for i in spots])[0]
    new = misspell(tokens[at], rng)
    return replace(tokens, at, new) if new != tokens[at] else None


def word_choice(tokens: Tokens, rng: random.Random) -> Optional[Tokens]:
    """A commonly confused word (their/there, then/than, affect/effect...)."""
    at = pick(rng, [i for i, t in enumerate(tokens) if t.lower() in CONFUSION])
    if at is None:
        return None
    return replace(tokens, at, match_case(rng.choice(CONFUSION[tokens[at].lower()]), tokens[at]))


def word_order(tokens: Tokens, rng: random.Random) -> Optional[Tokens]:
    """Two neighbouring words swapped, or an adverb in -ly moved by one or two words."""
    adverbs = [i for i, t in enumerate(tokens) if is_word(t) and t.endswith(ADVERB_SUFFIX) and len(t) > 4]
    if adverbs and rng.random() < 0.4:
        at = rng.choice(adverbs)
        to = min(max(0, at + rng.choice((-2, -1, 1, 2))), len(tokens) - 1)
        if to != at and is_word(tokens[to]):
            rest = tokens[:at] + tokens[at + 1:]
            return rest[:to] + [tokens[at]] + rest[to:]
    pairs = [i for i in range(len(tokens) - 1) if is_word(tokens[i]) and is_word(tokens[i + 1])
             and tokens[i].lower() != tokens[i + 1].lower() and (i or tokens[i + 1].islower())]
    at = pick(rng, pairs)
    if at is None:
        return None
    first, second = tokens[at], tokens[at + 1]
    if at == 0:   # keep the capital at the start
        first, second = match_case(first.lower(), second), match_case(second, first)
    return tokens[:at] + [second, first] + tokens[at + 2:]


def missing(tokens: Tokens, rng: random.Random) -> Optional[Tokens]:
    """A function word left out (to, of, is, that, it...)."""
    at = pick(rng, [i for i, t in enumerate(tokens) if t.lower() in FUNCTION_WORDS and t.lower() not in ARTICLES])
    if at is None or len(tokens) < 3:
        return None
    return tokens[:at] + tokens[at + 1:]


def extra(tokens: Tokens, rng: random.Random) -> Optional[Tokens]:
    """A word repeated, or a function word put where none belongs."""
    if not tokens:
        return None
    at = rng.randrange(1, len(tokens)) if len(tokens) > 1 else 0
    if rng.random() < 0.3 and is_word(tokens[at]):
        return tokens[:at] + [tokens[at]] + tokens[at:]
    new = rng.choice(("the", "to", "of", "is", "that", "a", "it", "for", "be", "more"))
    if at and tokens[at - 1].lower() == new:
        return None
    return tokens[:at] + [new] + tokens[at:]


def punctuation(tokens: Tokens, rng: random.Random) -> Optional[Tokens]:
    """A comma dropped or added, the final stop dropped, a possessive 's without its apostrophe,
    a contraction without its apostrophe (do n't -> dont)."""
    commas = [i for i, t in enumerate(tokens) if t == ","]
    gaps = [i for i in range(2, len(tokens) - 1) if tokens[i] not in PUNCTUATION and tokens[i - 1] not in PUNCTUATION]
    stops = [len(tokens) - 1] if tokens and tokens[-1] in (".", "!", "?") else []
    clitics = [i for i in range(1, len(tokens)) if tokens[i] in ("'s", "n't", "'m", "'re", "'ve", "'ll")]
    options = [(commas, lambda c: tokens[:c] + tokens[c + 1:]),
               (gaps, lambda c: tokens[:c] + [","] + tokens[c:]),
               (stops, lambda c: tokens[:c]),
               (clitics, lambda c: tokens[:c - 1] + [tokens[c - 1] + tokens[c].replace("'", "")] + tokens[c + 1:])]
    options = [(spots, change) for spots, change in options if spots]
    if not options:
        return None
    spots, change = rng.choice(options)
    return change(rng.choice(spots))


def casing(tokens: Tokens, rng: random.Random) -> Optional[Tokens]:
    """The first word or a name lower-cased, "I" as "i", a common word capitalised."""
    lower = [i for i, t in enumerate(tokens) if t[:1].isupper() and is_word(t)]
    upper = [i for i, t in enumerate(tokens) if i and t.islower() and is_word(t) and len(t) > 3]
    if lower and (rng.random() < 0.75 or not upper):
        at = rng.choice(lower)
        return replace(tokens, at, tokens[at].lower())
    at = pick(rng, upper)
    if at is None:
        return None
    return replace(tokens, at, tokens[at].capitalize())


ERRORS: Dict[str, Callable[[Tokens, random.Random], Optional[Tokens]]] = {
    "article": article, "preposition": preposition, "agreement": agreement, "verb_form": verb_form,
    "noun_number": noun_number, "spelling": spelling, "word_choice": word_choice, "word_order": word_order,
    "missing": missing, "extra": extra, "punctuation": punctuation, "casing": casing,
}
# relative frequencies, roughly those of learner corpora (spelling, articles and prepositions lead)
ERROR_WEIGHTS: Dict[str, float] = {
    "spelling": 0.20, "article": 0.13, "preposition": 0.10, "punctuation": 0.10, "noun_number": 0.09,
    "verb_form": 0.09, "word_choice": 0.07, "agreement": 0.06, "missing": 0.06, "extra": 0.04,
    "word_order": 0.03, "casing": 0.03,
}


def corrupt(tokens: Tokens, rng: random.Random, p_token: float = 0.08, p_clean: float = 0.2,
            ) -> Tuple[Tokens, List[str]]:
    """``tokens`` with synthetic errors, and the types of the errors made (empty: left clean)."""
    if not tokens or rng.random() < p_clean:
        return list(tokens), []
    rate = p_token * rng.uniform(0.25, 1.75)
    n_errors = max(1, sum(rng.random() < rate for _ in tokens))
    names, weights = list(ERROR_WEIGHTS), list(ERROR_WEIGHTS.values())
    made: List[str] = []
    for _ in range(4 * n_errors):   # a type with no place in this sentence is drawn again
        name = rng.choices(names, weights)[0]
        changed = ERRORS[name](tokens, rng)
        if changed and changed != tokens:
            tokens = changed
            made.append(name)
            if len(made) == n_errors:
                break
    return tokens, made


def add_noise(sentence: str, rng: random.Random, p_token: float = 0.08, p_clean: float = 0.2) -> str:
    """A noisy version of one tokenized sentence."""
    return " ".join(corrupt(sentence.split(), rng, p_token, p_clean)[0])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--p-token", type=float, default=0.08, help="mean errors per token of a noisy sentence")
    parser.add_argument("--p-clean", type=float, default=0.2, help="chance a sentence is left clean")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    for line in sys.stdin:
        sys.stdout.write(add_noise(line.strip(), rng, args.p_token, args.p_clean) + "\n")


if __name__ == "__main__":
    main()
