"""The synthetic GEC data: recipes/gec/clean_english.py (readers, tokenization, exclusion, held-out split) and
recipes/data/prepare-gec-synthetic.sh's DRY_RUN end to end on tests/fixtures/gec (synthetic sentences laid out
as the shared data folders), then SETTING=gec-6x6 and gec-12x2 through train-at.sh's dry run."""
import importlib.util
import json
from pathlib import Path

import pytest

from test_recipes_dry_run import recipe

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("clean_english", REPO / "recipes" / "gec" / "clean_english.py")
clean_english = importlib.util.module_from_spec(spec)
spec.loader.exec_module(clean_english)


def lines(path):
    return Path(path).read_text(encoding="utf-8").splitlines()


def test_tokenizer_splits_as_the_test_sets():
    tokenize = clean_english.Tokenizer()
    assert tokenize("I don't know, it's Steve's car.") == "I do n't know , it 's Steve 's car ."
    assert tokenize('They can\'t go (today) "now".') == "They ca n't go ( today ) \" now \" ."


def test_sources_exclusion_and_split(tmp_path):
    iwslt = tmp_path / "iwslt14" / "orig" / "de-en"
    iwslt.mkdir(parents=True)
    (iwslt / "talk.en.xml").write_text('<doc>\n<title>Not a segment</title>\n<seg id="1"> Rock &amp; roll lives on here. '
                                       '</seg>\n<seg id="2"> Too short </seg>\n</doc>\n')
    sci = tmp_path / "scitldr" / "SciTLDR-A"
    sci.mkdir(parents=True)
    docs = [{"source": ["We train a small model on one core.", "Rock & roll lives on here."],
             "target": ["A small model trains on one core."]},
            {"source": [f"Sentence number {i} is here." for i in range(10)], "target": []}]
    (sci / "train.jsonl").write_text("\n".join(json.dumps(d) for d in docs))
    exclude = tmp_path / "test.src"
    exclude.write_text("Sentence number 3 is here .\n")
    clean_english.main(["--data-dir", str(tmp_path), "--out-dir", str(tmp_path / "out"), "--sources",
                        "iwslt14,scitldr,asset", "--exclude", str(exclude), "--valid-size", "4"])
    out = tmp_path / "out"
    every = lines(out / "clean.train") + lines(out / "clean.valid")
    assert len(lines(out / "clean.valid")) == 4
    assert "Rock & roll lives on here ." in every and "Too short" not in " ".join(every)
    assert every.count("Rock & roll lives on here .") == 1                  # deduplicated across sources
    assert "Sentence number 3 is here ." not in every                        # excluded
    assert "A small model trains on one core ." in every                     # TL;DRs count as clean text
    assert lines(out / "clean.sources") == ["iwslt14\t1", "scitldr\t11"]     # asset: absent, skipped
    assert len(every) == 12


def test_dry_run_pairs(gec_data):
    out, _, log = gec_data
    raw = out / "raw"
    clean_train, clean_valid = lines(raw / "clean.train"), lines(raw / "clean.valid")
    assert len(clean_valid) == 20 and len(clean_train) > 50
    assert lines(raw / "train.tgt") == clean_train * 3                       # COPIES=3
    noisy = lines(raw / "train.src")
    assert len(noisy) == len(clean_train) * 3
    copies = [noisy[i * len(clean_train):(i + 1) * len(clean_train)] for i in range(3)]
    assert len({tuple(copy) for copy in copies}) == 3                       # a seed per copy
    clean_share = sum(a == b for a, b in zip(noisy, clean_train * 3)) / len(noisy)
    assert 0.05 < clean_share < 0.5
    assert lines(raw / "valid.tgt") == clean_valid and not set(clean_valid) & set(clean_train)
    held_out = set(lines(raw / "test.src") + lines(raw / "test1.src") + lines(raw / "test1.tgt"))
    held_out.update(*(lines(raw / f"test.ref{r}") for r in range(4)))
    assert not held_out & set(clean_train + clean_valid)
    assert lines(raw / "test.src")[0] == "I goes to school every days ."       # trailing space stripped
    assert lines(raw / "test1.tgt")[1] == "The results are shown in Table 2 ."
    assert "5 test1 (CoNLL-2013)" in log


def test_dry_run_binarized_and_rerun_skips(gec_data):
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    out, env, _ = gec_data
    bin_dir = out / "bin"
    assert (bin_dir / "dict.src.txt").read_text() == (bin_dir / "dict.tgt.txt").read_text()
    for split, n in (("valid", 20), ("test", 6), ("test1", 5)):
        for lang in ("src", "tgt"):
            assert len(MMapIndexedDataset(str(bin_dir / f"{split}.src-tgt.{lang}"))) == n
    before = (out / "raw" / "train.src").stat().st_mtime_ns
    _, log = recipe("data/prepare-gec-synthetic.sh", env)
    assert "learning sentencepiece" not in log and "Wrote preprocessed" not in log
    assert (out / "raw" / "train.src").stat().st_mtime_ns == before


@pytest.mark.slow
@pytest.mark.parametrize("setting", ["gec-6x6", "gec-12x2"])
def test_settings_train_in_a_dry_run(gec_data, setting, tmp_path):
    out, _, _ = gec_data
    save = tmp_path / setting
    _, log = recipe("train-at.sh", {"DRY_RUN": "1", "SETTING": setting, "RUNS": str(tmp_path / "runs"),
                                    "DATA": str(out / "bin"), "SAVE_DIR": str(save), "DRY_MAX_EPOCH": "1"})
    assert (save / "checkpoint_last.pt").exists()
    assert f"on {out / 'bin'} -> {save}" in log
