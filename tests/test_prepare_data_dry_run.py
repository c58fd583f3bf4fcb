"""recipes/data/prepare-wmt16-enro.sh and prepare-iwslt14-deen.sh on tiny synthetic local copies
(CPU, no network): the DRY_RUN slices, the Romanian normalisation, the reuse of IWSLT14's BPE
code, IWSLT14's local WIT3 path (clean before the valid split, fairseq's test order), and a
one-line error instead of a download when a dry run misses a local file."""
import os
import random
import re
import subprocess
import sys

import pytest

from conftest import BIN_DIR, REPO
from test_recipes_dry_run import RECIPES, recipe, write_parallel

RO_DIACRITICS = "ȘșȚțŞşŢţĂăÂâÎî"
EN_RO = {"the": "cei", "man": "bărbatul", "woman": "femeia", "sees": "vede", "big": "mare", "small": "mică",
         "house": "casă", "country": "țară", "city": "oraş", "and": "şi", "bread": "pâine", "old": "bătrână",
         "in": "în", "river": "râul", "island": "insulă"}
RO_LINE = "Ştefan şi Ţiţeica văd „România” în oraş: ȘȚĂÂÎ șțăâî Şţ."  # cedilla + comma forms
RO_LINE_NORM = 'Stefan si Titeica vad "Romania" in oras: STAAI staai St.'  # norm-ro --remove-diacritics


def lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def write_lines(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(row + "\n" for row in rows), encoding="utf-8")


def lexicon_pairs(n, rng, lexicon):
    """n sentence pairs translated word by word with ``lexicon`` (write_parallel's scheme)."""
    words, pairs = list(lexicon), []
    for _ in range(n):
        sent = [rng.choice(words) for _ in range(rng.randint(2, 9))]
        pairs.append((" ".join(sent).capitalize() + ".", " ".join(lexicon[w] for w in sent).capitalize() + "."))
    return pairs


def write_pairs(root, name, src, tgt, pairs):
    write_lines(root / f"{name}.{src}", [a for a, _ in pairs])
    write_lines(root / f"{name}.{tgt}", [b for _, b in pairs])


def run_failing(script, env):
    """Run a recipe that has to stop; return its stderr."""
    path = os.pathsep.join([str(BIN_DIR), os.environ.get("PATH", "")])
    proc = subprocess.run(["bash", str(RECIPES / script)], env={**os.environ, "PATH": path, "WORKERS": "1", **env},
                          text=True, capture_output=True, timeout=120)
    assert proc.returncode != 0, f"{script} should have failed:\n{proc.stderr[-3000:]}"
    return proc.stderr


def assert_binarized(bin_dir, src, tgt, sizes):
    """dict.*.txt (one joined dictionary) and train/valid/test .bin/.idx with ``sizes`` sentences."""
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    assert (bin_dir / f"dict.{src}.txt").read_text() == (bin_dir / f"dict.{tgt}.txt").read_text()
    for split, n in sizes.items():
        for lang in (src, tgt):
            prefix = bin_dir / f"{split}.{src}-{tgt}.{lang}"
            assert all((bin_dir / f"{prefix.name}.{ext}").exists() for ext in ("bin", "idx")), prefix
            assert len(MMapIndexedDataset(str(prefix))) == n, (prefix, n)


# --- WMT16 en-ro ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def wmt16_slice(tmp_path_factory):
    """Stand-in for ../shared/data/wmt/en-ro: newsdev2016-enro (260 lines), newstest2016 (60)."""
    root = tmp_path_factory.mktemp("wmt-en-ro")
    rng = random.Random(0)
    write_pairs(root, "newsdev2016-enro", "en", "ro", lexicon_pairs(260, rng, EN_RO))
    test = [("Stefan and Titeica see “Romania” in the city: SIAAI siaai St.", RO_LINE)]
    write_pairs(root, "newstest2016", "en", "ro", test + lexicon_pairs(59, rng, EN_RO))
    return root


@pytest.mark.slow
def test_wmt16_enro_dry_run(wmt16_slice, tmp_path):
    out = tmp_path / "enro"
    recipe("data/prepare-wmt16-enro.sh", {"DRY_RUN": "1", "WMT_DIR": str(wmt16_slice), "OUT_DIR": str(out),
                                          "DRY_BPE_OPS": "100"})
    dev, test = {lang: lines(wmt16_slice / f"newsdev2016-enro.{lang}") for lang in ("en", "ro")}, \
        {lang: lines(wmt16_slice / f"newstest2016.{lang}") for lang in ("en", "ro")}
    # the header's slices: train = newsdev2016[:200] (no TRAIN_DIR), valid = the next 50, test = newstest2016[:50]
    for lang in ("en", "ro"):
        assert lines(out / "raw" / "orig" / f"train.{lang}") == dev[lang][:200]
        assert lines(out / "raw" / "orig" / f"valid.{lang}") == dev[lang][200:250]
        assert lines(out / "raw" / "orig" / f"test.{lang}") == test[lang][:50]
        for split, n in (("train", 200), ("valid", 50), ("test", 50)):
            assert len(lines(out / "raw" / f"{split}.{lang}")) == n
    # Romanian normalised + diacritics removed; English copied; raw/orig keeps the references
    assert lines(out / "raw" / "test.ro")[0] == RO_LINE_NORM
    assert lines(out / "raw" / "orig" / "test.ro")[0] == RO_LINE
    for split in ("train", "valid", "test"):
        assert lines(out / "raw" / f"{split}.en") == lines(out / "raw" / "orig" / f"{split}.en")
        assert set(RO_DIACRITICS) & set((out / "raw" / "orig" / f"{split}.ro").read_text())
    processed = [out / "raw" / f"{s}.ro" for s in ("train", "valid", "test")] + \
        sorted((out / "tok").glob("*.ro")) + sorted((out / "bpe").glob("*.ro")) + [out / "bin" / "dict.ro.txt"]
    for path in processed:
        assert not set(RO_DIACRITICS) & set(path.read_text(encoding="utf-8")), path
    assert "Stefan" in lines(out / "tok" / "test.ro")[0]  # Moses tokenized (quotes split off)
    # joint BPE learned on the (cleaned) train slice, then one joined dictionary
    assert (out / "bpe" / "code").stat().st_size > 0
    n_train = len(lines(out / "tok" / "train.clean.en"))
    assert 0 < n_train <= 200
    assert_binarized(out / "bin", "en", "ro", {"train": n_train, "valid": 50, "test": 50})


@pytest.mark.slow
def test_wmt16_roen_dry_run_with_train_dir(wmt16_slice, tmp_path):
    """ro->en with a local TRAIN_DIR/train.{en,ro} and DRY_LINES=60: the source side is normalised."""
    train_dir = tmp_path / "train"
    write_pairs(train_dir, "train", "en", "ro", lexicon_pairs(90, random.Random(2), EN_RO))
    out = tmp_path / "roen"
    recipe("data/prepare-wmt16-enro.sh", {"DRY_RUN": "1", "WMT_DIR": str(wmt16_slice), "TRAIN_DIR": str(train_dir),
                                          "OUT_DIR": str(out), "SRC": "ro", "TGT": "en", "DRY_LINES": "60",
                                          "DRY_BPE_OPS": "50"})
    assert lines(out / "raw" / "orig" / "train.ro") == lines(train_dir / "train.ro")[:60]
    assert lines(out / "raw" / "orig" / "valid.ro") == lines(wmt16_slice / "newsdev2016-enro.ro")[60:110]
    assert lines(out / "raw" / "test.ro")[0] == RO_LINE_NORM
    assert not set(RO_DIACRITICS) & set((out / "raw" / "train.ro").read_text())
    n_train = len(lines(out / "tok" / "train.clean.ro"))
    assert_binarized(out / "bin", "ro", "en", {"train": n_train, "valid": 50, "test": 50})


@pytest.mark.parametrize("missing", ["newsdev2016-enro.en", "newstest2016.ro"])
def test_wmt16_enro_dry_run_missing_local_file(wmt16_slice, tmp_path, missing):
    wmt_dir = tmp_path / "wmt"
    wmt_dir.mkdir()
    for f in wmt16_slice.iterdir():
        if f.name != missing:
            (wmt_dir / f.name).write_bytes(f.read_bytes())
    err = run_failing("data/prepare-wmt16-enro.sh", {"DRY_RUN": "1", "WMT_DIR": str(wmt_dir),
                                                     "OUT_DIR": str(tmp_path / "out")})
    assert len(err.strip().splitlines()) == 1, err          # no traceback, no download attempt
    assert "ERROR: dry run" in err and str(wmt_dir / missing) in err, err


@pytest.mark.parametrize("missing", ["newstest2013.de", "newstest2014.en"])
def test_wmt14_ende_dry_run_missing_local_file(tmp_path, missing):
    """A dry run never downloads: without the local newstest file it stops in one line before sacreBLEU's download."""
    wmt_dir = tmp_path / "wmt"
    for name in ("newstest2013", "newstest2014"):
        write_pairs(wmt_dir, name, "en", "de", [("a house .", "ein Haus .")] * 300)
    (wmt_dir / missing).unlink()
    err = run_failing("data/prepare-wmt14-ende.sh", {"DRY_RUN": "1", "WMT_DIR": str(wmt_dir),
                                                     "OUT_DIR": str(tmp_path / "out")})
    assert len(err.strip().splitlines()) == 1, err
    assert "ERROR: dry run" in err and str(wmt_dir / missing) in err, err


# --- IWSLT14 de-en -------------------------------------------------------------------------------

def fairseq_tokenized(sentence):
    """The look of fairseq's iwslt14.tokenized.de-en/tmp files: Moses-tokenized, lowercased."""
    return sentence.lower().replace(".", " .")


# a hand-written subword-nmt code: "the", "die" and "." stay whole, every other word falls into characters
IWSLT_CODE = "#version: 0.2\nt h\nth e</w>\nd i\ndi e</w>\n"


@pytest.fixture(scope="module")
def iwslt_tokenized(tmp_path_factory):
    """Stand-in for ../shared/data/iwslt14/iwslt14.tokenized.de-en: tmp/valid (260), tmp/test (60), code."""
    root = tmp_path_factory.mktemp("iwslt14")
    tok = root / "iwslt14.tokenized.de-en"
    (tok / "tmp").mkdir(parents=True)
    rng = random.Random(3)
    for split, n in (("valid", 260), ("test", 60)):
        write_parallel(tok / "tmp" / f"{split}.en", tok / "tmp" / f"{split}.de", n, rng)
        for lang in ("en", "de"):
            rows = [fairseq_tokenized(s) for s in lines(tok / "tmp" / f"{split}.{lang}")]
            if split == "test":  # already tokenized text with Moses escapes: a dry run must not touch it
                rows[0] = {"en": "it &apos;s a well-known house .", "de": "es ist ein bekanntes haus ."}[lang]
            write_lines(tok / "tmp" / f"{split}.{lang}", rows)
    (tok / "code").write_text(IWSLT_CODE)
    return root


@pytest.mark.slow
def test_iwslt14_deen_dry_run(iwslt_tokenized, tmp_path):
    out = tmp_path / "iwslt"
    _, err = recipe("data/prepare-iwslt14-deen.sh", {"DRY_RUN": "1", "IWSLT_DIR": str(iwslt_tokenized),
                                                     "OUT_DIR": str(out)})
    tmp = iwslt_tokenized / "iwslt14.tokenized.de-en" / "tmp"
    # the header's slices: train = tmp/valid[:200], valid = tmp/valid[200:250], test = tmp/test[:50]
    for lang in ("de", "en"):
        assert lines(out / "raw" / f"train.{lang}") == lines(tmp / f"valid.{lang}")[:200]
        assert lines(out / "raw" / f"valid.{lang}") == lines(tmp / f"valid.{lang}")[200:250]
        assert lines(out / "raw" / f"test.{lang}") == lines(tmp / f"test.{lang}")[:50]
        assert lines(out / "tok" / f"test.{lang}") == lines(out / "raw" / f"test.{lang}")  # not re-tokenized
    assert lines(out / "tok" / "test.en")[0] == "it &apos;s a well-known house ."
    # the local BPE code is reused, not learned
    assert (out / "bpe" / "code").read_text() == IWSLT_CODE and "learning joint BPE" not in err
    bpe_words = " ".join(lines(out / "bpe" / "train.clean.en") + lines(out / "bpe" / "train.clean.de")).split()
    assert {"the", "die", "."} <= set(bpe_words) and "h@@" in bpe_words
    assert not {"house", "haus"} & set(bpe_words)
    n_train = len(lines(out / "tok" / "train.clean.en"))
    assert 0 < n_train <= 200
    assert_binarized(out / "bin", "de", "en", {"train": n_train, "valid": 50, "test": 50})


@pytest.mark.parametrize("missing", ["tmp/test.de", "tmp/valid.en", "code"])
def test_iwslt14_deen_dry_run_missing_local_file(iwslt_tokenized, tmp_path, missing):
    local = tmp_path / "iwslt14" / "iwslt14.tokenized.de-en"
    for f in (iwslt_tokenized / "iwslt14.tokenized.de-en").rglob("*"):
        rel = f.relative_to(iwslt_tokenized / "iwslt14.tokenized.de-en")
        if f.is_file() and str(rel) != missing:
            (local / rel).parent.mkdir(parents=True, exist_ok=True)
            (local / rel).write_bytes(f.read_bytes())
    err = run_failing("data/prepare-iwslt14-deen.sh", {"DRY_RUN": "1", "IWSLT_DIR": str(local.parent),
                                                       "OUT_DIR": str(tmp_path / "out")})
    assert len(err.strip().splitlines()) == 1, err
    assert "ERROR: dry run" in err and str(local / missing) in err, err


TEST_SETS = ["IWSLT14.TED.dev2010", "IWSLT14.TEDX.dev2012", "IWSLT14.TED.tst2010", "IWSLT14.TED.tst2011",
             "IWSLT14.TED.tst2012"]  # fairseq's prepare-iwslt14.sh order


@pytest.mark.slow
def test_iwslt14_deen_local_wit3(tmp_path):
    """DRY_RUN=0 on a local WIT3 copy (orig/de-en: train.tags + xml): metadata dropped, pairs cleaned
    (ratio 1.5) before every 23rd kept line becomes valid, test in fairseq's order; no download."""
    orig = tmp_path / "iwslt14" / "orig" / "de-en"
    rng = random.Random(4)
    tags = {"en": [], "de": []}
    kept = []  # the (en, de) lines that strip-tags keeps and the length filter passes
    for talk in range(4):
        for lang, title, desc in (("en", "The big house", "A dog sees a car."),
                                  ("de", "Das grosse Haus", "Ein Hund sieht ein Auto.")):
            tags[lang] += [f"<url>http://www.ted.com/talks/talk{talk}.html</url>", "<keywords>talks, test</keywords>",
                           f"<speaker>Speaker {talk}</speaker>", f"<talkid>{talk}</talkid>",
                           f"<title>Title {talk}: {title}</title>", f"<description>TED: {desc}</description>"]
        kept += [(f"Title {talk}: The big house", f"Title {talk}: Das grosse Haus"),
                 ("TED: A dog sees a car.", "TED: Ein Hund sieht ein Auto.")]
        src = tmp_path / "pairs"
        write_parallel(src.with_suffix(".en"), src.with_suffix(".de"), 60, rng)
        for i, pair in enumerate(zip(lines(src.with_suffix(".en")), lines(src.with_suffix(".de")))):
            if i % 7 == 3:  # 2 vs 8 tokens: dropped by the ratio filter
                pair = ("Yes.", "Ja, ja, ja, ja.")
            else:
                kept.append(pair)
            tags["en"].append(pair[0])
            tags["de"].append(pair[1])
    for lang in ("en", "de"):
        write_lines(orig / f"train.tags.de-en.{lang}", tags[lang])
        for name in TEST_SETS:
            segs = [f'<seg id="{i}"> {name.split(".")[-1]} talk {i}, it’s {lang}. </seg>' for i in (1, 2)]
            write_lines(orig / f"{name}.de-en.{lang}.xml",
                        ['<?xml version="1.0" encoding="UTF-8"?>', "<mteval>", '<doc docid="1" genre="lectures">',
                         "<url>http://www.ted.com/talks/x.html</url>", *segs, "</doc>", "</mteval>"])
    out = tmp_path / "out"
    _, err = recipe("data/prepare-iwslt14-deen.sh", {"DRY_RUN": "0", "IWSLT_DIR": str(tmp_path / "iwslt14"),
                                                     "IWSLT_URL": "http://invalid.invalid/de-en.tgz",
                                                     "OUT_DIR": str(out), "BPE_OPS": "60"})
    assert "downloading" not in err and not (out / "download").exists()
    valid = [p for k, p in enumerate(kept, 1) if k % 23 == 0]
    train = [p for k, p in enumerate(kept, 1) if k % 23 != 0]
    for i, lang in enumerate(("en", "de")):
        assert lines(out / "raw" / f"valid.{lang}") == [p[i] for p in valid]
        assert lines(out / "raw" / f"train.{lang}") == [p[i] for p in train]
        tok_valid = lines(out / "tok" / f"valid.{lang}")
        assert len(tok_valid) == len(valid) and all(t == t.lower() and t.endswith(" .") for t in tok_valid)
        assert lines(out / "raw" / f"test.{lang}") == [
            f"{name.split('.')[-1]} talk {i}, it's {lang}." for name in TEST_SETS for i in (1, 2)]
    assert not any(re.search(r"<|speaker|talkid|http", line) for line in lines(out / "raw" / "train.en"))
    assert lines(out / "tok" / "test.en")[0] == "dev2010 talk 1 , it 's en ."  # Moses, no -a, lowercased
    assert_binarized(out / "bin", "de", "en", {"train": len(train), "valid": len(valid), "test": 10})


def test_clean_refuses_sides_of_different_lengths(tmp_path):
    """A truncated side (a download cut short) must not silently cut the corpus to the shorter file."""
    (tmp_path / "a.en").write_text("a b\nc d\ne f\n")
    (tmp_path / "a.de").write_text("x y\nz w\n")
    proc = subprocess.run([sys.executable, str(REPO / "recipes" / "lib" / "text_tools.py"), "clean",
                           str(tmp_path / "a.en"), str(tmp_path / "a.de"), str(tmp_path / "o.en"), str(tmp_path / "o.de")],
                          text=True, capture_output=True, timeout=60)
    assert proc.returncode != 0 and "have different line counts (one ends after 2 lines)" in proc.stderr
