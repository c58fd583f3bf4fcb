"""The latency harness's GEC scores (``--score jfleg`` / ``conll2013``: ``bench.task_score`` on the functions of
``fairseq_plugins.scripts.gec_score``) and recipes/benchmark-gec.sh's quick mode (DRY_RUN=1), on tests/fixtures/gec
prepared by recipes/data/prepare-gec-synthetic.sh's dry run and a tiny model that learned its test sets."""
import os
import re
import subprocess

import pytest

from conftest import BIN_DIR, GEC_FIXTURES as FIXTURES, REPO, ctranslate2_rows
from fairseq_plugins.bench import latency, report, task_score
from fairseq_plugins.scripts import gec_score
from fairseq_plugins_compat.errors import PluginError

JFLEG_SOURCE, JFLEG_REFERENCES = gec_score.jfleg_files(FIXTURES, "dev")
CONLL_M2 = gec_score.conll2013_file(FIXTURES)


def jfleg():
    """(sources, [references 0..3]) of the fixture's JFLEG dev."""
    return gec_score.read_lines(JFLEG_SOURCE), [gec_score.read_lines(path) for path in JFLEG_REFERENCES]


def expected_score(name, ids, texts):
    """gec_score's own figure for ``texts``, the outputs of sentences ``ids``."""
    if name == "jfleg":
        sources, references = jfleg()
        references = [[r[i] for i in ids] for r in references]
        return gec_score.score_jfleg(texts, [sources[i] for i in ids], references)["GLEU"]
    m2 = gec_score.read_m2(CONLL_M2)
    return gec_score.score_m2(texts, [m2[i] for i in ids])["F0.5"]


def test_jfleg_score_is_gleu_of_the_sentences_scored():
    sources, references = jfleg()
    score = task_score.load("jfleg", FIXTURES, len(sources), "test")
    texts = references[1]
    assert score.header == "GLEU (JFLEG dev)"
    assert score.score(range(6), texts) == gec_score.score_jfleg(texts, sources, references)["GLEU"] > 0
    ids = [1, 3, 4]  # a subset scores against its own sources and references
    subset = [texts[i] for i in ids]
    assert score.score(ids, subset) == expected_score("jfleg", ids, subset)
    assert score.score(ids, subset) != score.score(range(3), subset)


def test_conll2013_score_is_edit_f05_of_the_sentences_scored():
    m2 = gec_score.read_m2(CONLL_M2)
    corrected = [" ".join(gec_score.apply_edits(s.source, s.annotators[0])) for s in m2]
    texts = [corrected[0], " ".join(m2[1].source), corrected[2], " ".join(m2[3].source), corrected[4]]
    score = task_score.load("conll2013", FIXTURES, len(m2), "test1")
    assert score.header == "F0.5 (CoNLL-2013)"
    assert score.score(range(5), texts) == gec_score.score_m2(texts, m2)["F0.5"] > 0
    assert score.score([1, 2], texts[1:3]) == expected_score("conll2013", [1, 2], texts[1:3])


def test_missing_references_and_another_split_are_one_line_errors(tmp_path):
    problem = task_score.reference_problem("jfleg", tmp_path)
    assert problem.startswith("--score jfleg: no references: ") and "dev.ref3" in problem and "\n" not in problem
    assert task_score.reference_problem("bleu", tmp_path) is None
    assert task_score.reference_problem("conll2013", FIXTURES) is None
    with pytest.raises(PluginError, match=r"^--score conll2013: no references: .*official-preprocessed\.m2 missing"):
        latency.parse_args([str(tmp_path), "--path", "model.pt", "--score", "conll2013", "--score-data-dir",
                            str(tmp_path)])
    with pytest.raises(PluginError, match="have 5 sentences, the test split 6 .*must be the CoNLL-2013 split"):
        task_score.load("conll2013", FIXTURES, 6, "test")
    assert task_score.load("bleu", tmp_path, 6, "test") is None


def test_the_table_names_its_score():
    assert report.columns("bleu") == report.COLUMNS
    columns = report.columns("conll2013")
    assert columns[report.COLUMNS.index("BLEU")] == "F0.5 (CoNLL-2013)" and "BLEU" not in columns


def test_recipe_says_how_to_make_its_inputs(tmp_path):
    for split in ("test", "test1"):
        (tmp_path / f"{split}.src-tgt.src.bin").write_text("binarized")
    env = {**os.environ, "PATH": os.pathsep.join([str(BIN_DIR), os.environ.get("PATH", "")]),
           "MODEL": str(tmp_path / "none.pt"), "DATA": str(FIXTURES), "RUNS": str(tmp_path)}
    for extra, message in (({}, "no prepared GEC data in DATA=.*: run bash recipes/data/prepare-gec-synthetic.sh"),
                           ({"DATA": str(tmp_path)},
                            r"no GEC model at MODEL=.*: train one \(SETTING=gec-6x6 bash recipes/train-at.sh\)")):
        proc = subprocess.run(["bash", str(REPO / "recipes" / "benchmark-gec.sh")], env={**env, **extra}, cwd=REPO,
                              text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        assert proc.returncode != 0 and re.search(message, proc.stderr), proc.stderr[-2000:]


def test_recipe_names_a_wrong_other_model(tmp_path):
    for split in ("test", "test1"):
        (tmp_path / f"{split}.src-tgt.src.bin").write_text("binarized")
    (tmp_path / "model.pt").write_text("a model")
    env = {**os.environ, "PATH": os.pathsep.join([str(BIN_DIR), os.environ.get("PATH", "")]),
           "MODEL": str(tmp_path / "model.pt"), "DATA": str(tmp_path), "RUNS": str(tmp_path)}
    for other, message in (("deep", "OTHER_MODELS: expected NAME=CHECKPOINT, got deep"),
                           (f"deep={tmp_path / 'none.pt'}", "OTHER_MODELS: no model at .*none.pt \\(deep\\)")):
        proc = subprocess.run(["bash", str(REPO / "recipes" / "benchmark-gec.sh")], env={**env, "OTHER_MODELS": other},
                              cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        assert proc.returncode != 0 and re.search(message, proc.stderr), proc.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("split,name,sentences", [("test", "jfleg", 4), ("test1", "conll2013", 0)])
def test_harness_cells_are_gec_scores_figures(gec_model, split, name, sentences):
    data, model = gec_model
    result = latency.main([str(data), "--path", str(model), "--gen-subset", split, "--score", name,
                           "--score-data-dir", str(FIXTURES), "--remove-bpe", "sentencepiece", "--max-len-a", "1.2",
                           "--max-len-b", "10", "--decoders", "beam1,greedy,iad,beam5", "--max-sentences",
                           str(sentences), "--no-ctranslate2", "--warmup", "0", "--rounds", "1", "--no-progress-bar"])
    rows = {row["decoder"]: row for row in result["rows"]}
    assert list(rows) == ["beam1", "greedy", "iad", "beam5"]
    table = report.markdown(result)
    header = next(line for line in table.splitlines() if line.startswith("| decoder |"))
    column = header.split(" | ").index(task_score.HEADERS[name])
    for label, row in rows.items():
        assert row["ids"] == list(range(sentences or 5))
        assert row["score"] == expected_score(name, row["ids"], row["outputs"]), label
        cells = next(line for line in table.splitlines() if line.startswith(f"| {label} |")).split(" | ")
        assert cells[column] == f"{row['score']:.2f}"
    assert rows["beam1"]["score"] > 0  # the model learned the corrections: a score that ordering errors would change
    assert rows["iad"]["outputs"] == rows["beam1"]["outputs"] and rows["iad"]["mismatches_vs_greedy"] == 0
    assert result["settings"]["score"] == name


@pytest.mark.slow
def test_recipe_quick_mode_writes_a_section_per_test_set_and_batch_size(gec_model, tmp_path):
    from fairseq_plugins.scripts import copy_layers

    data, model = gec_model
    deep = tmp_path / "deep.pt"  # OTHER_MODELS: a second model in the same tables (a 3+1 warm start of the model)
    copy_layers.main([str(model), str(deep), "--encoder-layers", "3", "--decoder-layers", "1"])
    doc = tmp_path / "gec.md"
    old = "<!-- bench:gec-cpu-jfleg-b1 -->\nold\n<!-- /bench:gec-cpu-jfleg-b1 -->\n"
    doc.write_text(f"# GEC\n\nProse.\n\n## Benchmark\n\n{old}")
    env = {"DRY_RUN": "1", "MODEL": str(model), "DATA": str(data), "GEC_DATA_DIR": str(FIXTURES),
           "OUT_DIR": str(tmp_path / "out"), "DOC": str(doc), "BATCH_SIZES": "1 2", "WARMUP": "0",
           "RUNS": str(tmp_path), "OTHER_MODELS": f"deep={deep}"}
    proc = subprocess.run(["bash", str(REPO / "recipes" / "benchmark-gec.sh"), "--rounds", "1"],
                          env={**os.environ, **env}, cwd=REPO, text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert proc.stdout.strip().splitlines()[-1] == str(doc)
    text = doc.read_text()
    assert text.startswith("# GEC\n\nProse.\n\n## Benchmark\n\n<!-- bench:gec-cpu-jfleg-b1 -->\n")
    assert "\nold\n" not in text
    ct2_rows = ctranslate2_rows()
    for name, sentences in (("jfleg", 6), ("conll2013", 5)):
        for bs in (1, 2):
            start, end = report.section_markers(f"gec-cpu-{name}-b{bs}")
            section = text.split(start)[1].split(end)[0]
            assert f"{sentences} sentences" in section and f"| {task_score.HEADERS[name]} |" in section
            lines = [line for line in section.splitlines() if re.match(rf"^\| .+ \| {bs} \|", line)]
            rows = {cells[0]: cells for cells in ([cell.strip() for cell in line.split("|")[1:-1]] for line in lines)}
            assert list(rows) == ["beam1", "greedy", "iad", "iad:match_length=2", "iad:block=8", "bound", "beam5",
                                  "beam1:model=deep", "greedy:model=deep", "iad:model=deep", *ct2_rows]
            assert rows["iad:model=deep"][-2:] == ["0", "0"] and "deep = `" in section
            for label in ("greedy", "iad", "iad:match_length=2", "iad:block=8"):
                assert rows[label][-2:] == ["0", "0"] and rows[label][-3] == rows["beam1"][-3], (name, bs, label)
            assert (tmp_path / "out" / f"gec-cpu-{name}-b{bs}.json").exists()

