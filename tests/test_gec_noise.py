"""recipes/lib/gec_noise.py: every error type fires where the sentence offers a place, seeded runs repeat,
the clean share and the error rate follow their options."""
import importlib.util
import io
import random
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("gec_noise", REPO / "recipes" / "lib" / "gec_noise.py")
gec_noise = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gec_noise)

SENTENCES = [
    "The engineers have finished the new bridge over the river , and they open it on Sunday .",
    "She quickly writes a letter to her friend in London because it is raining .",
    "My children went to the museum with their teacher yesterday .",
    "I do n't think there are many books about this information in the library .",
    "A man is walking his dog through the park while children are playing football .",
]
TEXT = " ".join(SENTENCES).split()


def changes(name, tokens, seeds=range(40)):
    """The outputs of error type ``name`` on ``tokens`` over several seeds (None: no place)."""
    return [gec_noise.ERRORS[name](list(tokens), random.Random(seed)) for seed in seeds]


@pytest.mark.parametrize("name", sorted(gec_noise.ERRORS))
def test_each_error_type_changes_the_sentence(name):
    outs = changes(name, TEXT)
    changed = [out for out in outs if out is not None and out != TEXT]
    assert len(changed) >= 30, f"{name} changed {len(changed)} of 40"
    assert len({" ".join(out) for out in changed}) > 3, f"{name} always makes the same change"


def differing(a, b):
    """Tokens of ``a`` and of ``b`` outside their common prefix and suffix."""
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    j = 0
    while j < min(len(a), len(b)) - i and a[-1 - j] == b[-1 - j]:
        j += 1
    return a[i:len(a) - j], b[i:len(b) - j]


def test_error_types_touch_their_words():
    rng = random.Random(0)
    for _ in range(30):
        sent = rng.choice(SENTENCES).split()
        out = gec_noise.article(list(sent), rng)
        assert set(w.lower() for w in sum(differing(sent, out), [])) <= set(gec_noise.ARTICLES) | \
            {w.lower() for w in sent}
        old, new = differing(sent, gec_noise.preposition(list(sent), rng))
        assert len(old) == 1 and old[0].lower() in gec_noise.PREPOSITIONS and len(new) <= 1
        out = gec_noise.spelling(list(sent), rng)
        old, new = differing(sent, out)
        assert len(old) == len(new) == 1 and abs(len(old[0]) - len(new[0])) <= 1
        out = gec_noise.word_order(list(sent), rng)
        assert sorted(w.lower() for w in out) == sorted(w.lower() for w in sent)
        out = gec_noise.missing(list(sent), rng)
        assert len(out) == len(sent) - 1
        out = gec_noise.extra(list(sent), rng)
        assert out is None or len(out) == len(sent) + 1
        out = gec_noise.casing(list(sent), rng)
        assert [w.lower() for w in out] == [w.lower() for w in sent] and out != sent


def test_morphology_rules():
    assert gec_noise.agreement("they are here".split(), random.Random(0)) == "they is here".split()
    assert gec_noise.agreement("it works".split(), random.Random(0)) == "it work".split()
    assert gec_noise.noun_number("some informations".split(), random.Random(0)) in (
        "some informationss".split(), "some information".split())
    assert gec_noise.noun_number("many cities".split(), random.Random(0)) == "many city".split()
    assert gec_noise.noun_number("one child".split(), random.Random(0)) == "one children".split()
    went = gec_noise.verb_form("we went home".split(), random.Random(0))
    assert went[1] in ("go", "goes", "going", "gone", "goed") and went[0::2] == ["we", "home"]


def test_no_place_gives_none():
    tokens = "Hello !".split()
    for name in ("preposition", "agreement", "word_choice", "missing"):
        assert gec_noise.ERRORS[name](list(tokens), random.Random(0)) is None, name


def run_cli(args, lines):
    stdin, stdout = sys.stdin, sys.stdout
    sys.stdin, sys.stdout = io.StringIO("".join(line + "\n" for line in lines)), io.StringIO()
    try:
        gec_noise.main(args)
        return sys.stdout.getvalue().splitlines()
    finally:
        sys.stdin, sys.stdout = stdin, stdout


def test_seeded_runs_repeat_and_seeds_differ():
    lines = SENTENCES * 20
    first = run_cli(["--seed", "3"], lines)
    assert first == run_cli(["--seed", "3"], lines)
    assert first != run_cli(["--seed", "4"], lines)
    assert len(first) == len(lines)


def test_clean_share_and_error_rate():
    lines = SENTENCES * 200   # 1,000 sentences
    for p_clean in (0.0, 0.2, 0.5):
        out = run_cli(["--seed", "1", "--p-clean", str(p_clean)], lines)
        clean = sum(a == b for a, b in zip(out, lines)) / len(lines)
        # a noisy sentence always gets an error; a no-op (e.g. a swap of equal words) is rare
        assert abs(clean - p_clean) < 0.05, (p_clean, clean)
    low = run_cli(["--seed", "1", "--p-clean", "0", "--p-token", "0.03"], lines)
    high = run_cli(["--seed", "1", "--p-clean", "0", "--p-token", "0.2"], lines)

    def edits(out):
        return sum(len(differing(a.split(), b.split())[1]) + 1 for a, b in zip(out, lines) if a != b)
    assert edits(high) > 2 * edits(low)


def test_every_type_occurs_in_a_corpus():
    rng = random.Random(5)
    seen = set()
    for sent in SENTENCES * 100:
        seen.update(gec_noise.corrupt(sent.split(), rng, p_token=0.1, p_clean=0.0)[1])
    assert seen == set(gec_noise.ERRORS)
