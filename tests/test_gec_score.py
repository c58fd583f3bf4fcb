"""fairseq_plugins/scripts/gec_score.py on the hand-written JFLEG- and CoNLL-style files of tests/fixtures/gec:
the .m2 reader, the edit matcher's counts, BLEU/GLEU of copies and references, the command line."""
import subprocess
import sys
from pathlib import Path

import pytest

from fairseq_plugins.scripts import gec_score
from fairseq_plugins.scripts.gec_score import Edit

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "gec"
M2 = FIXTURES / "conll2013" / "revised" / "official-preprocessed.m2"
CORRECTED = [
    "In the modern world , people use technology every day .",
    "The results are shown in Table 2 .",
    "This sentence has no error at all .",
    "He arrived home late and ate dinner .",
    "Students should study hard for exams .",
]


@pytest.fixture(scope="module")
def sentences():
    return gec_score.read_m2(M2)


def test_read_m2(sentences):
    assert len(sentences) == 5
    first = sentences[0]
    assert first.source[:3] == ["In", "modern", "world"]
    assert first.annotators[0][0] == Edit(1, 1, ("the",))
    assert first.annotators[0][3] == Edit(6, 7, ())        # -NONE-: a deletion
    assert sentences[2].annotators == {0: []}               # noop only
    assert sum(len(s.annotators[0]) for s in sentences) == 11


def test_apply_edits_gives_the_corrections(sentences):
    assert [" ".join(gec_score.apply_edits(s.source, s.annotators[0])) for s in sentences] == CORRECTED


def test_gold_corrections_score_100_and_copy_0(sentences):
    gold = gec_score.score_m2(CORRECTED, sentences)
    assert (gold["correct"], gold["proposed"], gold["gold"]) == (11, 11, 11)
    assert gold["F0.5"] == pytest.approx(100)
    copy = gec_score.score_m2([" ".join(s.source) for s in sentences], sentences)
    assert (copy["correct"], copy["proposed"], copy["P"], copy["R"], copy["F0.5"]) == (0, 0, 100, 0, 0)


def test_partial_and_wrong_edits(sentences):
    hyps = [
        "In the modern world , peoples uses the technology every day .",   # 1 of 4 right
        "The results is shown in the table 2 .",                           # 1 wrong (and 2 missed)
        "This sentence has no errors at all .",                            # 1 wrong on a clean sentence
        "He arrived home late and eat dinner .",                          # 2 of 3 right (adjacent, touching)
        "Students should study hard for exams .",                          # 2 of 2 right
    ]
    scores = gec_score.score_m2(hyps, sentences)
    assert (scores["correct"], scores["proposed"], scores["gold"]) == (5, 7, 11)
    p, r = 5 / 7, 5 / 11
    assert scores["P"] == pytest.approx(100 * p)
    assert scores["F0.5"] == pytest.approx(100 * 1.25 * p * r / (0.25 * p + r))


def test_adjacent_gold_edits_count_separately():
    source = "he go to the school".split()
    gold = [Edit(1, 2, ("goes",)), Edit(3, 4, ())]
    hyp = "he goes to school".split()
    assert gec_score.edit_counts(source, gec_score.hypothesis_edits(source, hyp), gold) == (2, 2, 2)
    only_first = "he goes to the school".split()
    assert gec_score.edit_counts(source, gec_score.hypothesis_edits(source, only_first), gold) == (1, 1, 2)
    merged_wrong = "he went into school".split()
    correct, proposed, _ = gec_score.edit_counts(source, gec_score.hypothesis_edits(source, merged_wrong), gold)
    assert correct == 0 and proposed >= 1


def test_more_annotators_pick_the_best():
    sentence = gec_score.M2Sentence("a cat sit".split(), {0: [Edit(2, 3, ("sits",))], 1: [Edit(2, 3, ("sat",))]})
    assert gec_score.score_m2(["a cat sat"], [sentence])["F0.5"] == pytest.approx(100)
    assert gec_score.score_m2(["a cat sits"], [sentence])["F0.5"] == pytest.approx(100)


def jfleg():
    src, refs = gec_score.jfleg_files(FIXTURES, "dev")
    return gec_score.read_lines(src), [gec_score.read_lines(r) for r in refs]


def test_bleu_and_gleu_rank_references_above_copies():
    srcs, refs = jfleg()
    assert srcs[0] == "I goes to school every days ."    # trailing space stripped
    copy = gec_score.score_jfleg(srcs, srcs, refs)
    ref = gec_score.score_jfleg(refs[0], srcs, refs)
    assert ref["BLEU"] == pytest.approx(100)
    assert copy["BLEU"] < ref["BLEU"] and copy["GLEU"] < ref["GLEU"]
    assert gec_score.gleu(srcs, refs[0], refs) == ref["GLEU"]            # seeded: repeatable
    half = refs[0][:3] + srcs[3:]
    assert copy["GLEU"] < gec_score.gleu(srcs, half, refs) < ref["GLEU"]


def test_length_mismatch_is_one_line():
    srcs, refs = jfleg()
    with pytest.raises(SystemExit, match="5 hypotheses for 6 test sentences"):
        gec_score.score_jfleg(srcs[:5], srcs, refs)


def run(capsys, *args):
    gec_score.main(list(args))
    return capsys.readouterr().out


def test_help_as_a_module():
    out = subprocess.run([sys.executable, "-m", "fairseq_plugins.scripts.gec_score", "--help"],
                         text=True, capture_output=True, check=True).stdout
    assert "conll2013" in out and "jfleg" in out


def test_cli(tmp_path, capsys):
    out = run(capsys, "conll2013", "--copy", "--data-dir", str(FIXTURES))
    assert out.startswith("copy\t") and "F0.5 0.00" in out
    assert run(capsys, "m2-target", str(M2)).splitlines() == CORRECTED
    hyp = tmp_path / "hyp.txt"
    hyp.write_text("".join(line + "\n" for line in CORRECTED))
    assert "F0.5 100.00" in run(capsys, "conll2013", "--hyp", str(hyp), "--m2", str(M2))
    generated = tmp_path / "gen.txt"   # fairseq-generate's order: by length, with S/T/D/P lines
    generated.write_text("".join(f"S-{i}\tx\nH-{i}\t-0.1\t{CORRECTED[i]}\nD-{i}\t-0.1\t{CORRECTED[i]}\n"
                                 for i in (3, 0, 4, 1, 2)) + "Generate test with beam=1: BLEU4 = 1.0\n")
    assert gec_score.read_hypotheses(generated) == CORRECTED
    assert "F0.5 100.00" in run(capsys, "conll2013", "--hyp", str(generated), "--m2", str(M2))
    out = run(capsys, "jfleg", "--hyp", str(FIXTURES / "jfleg" / "dev" / "dev.ref0"), "--data-dir", str(FIXTURES))
    assert "BLEU 100.00" in out and "GLEU" in out
