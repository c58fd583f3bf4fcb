"""More sources for a drafter: context-matched word substitutions (fairseq_plugins.scripts.augment_sources)."""
import subprocess
import sys

from conftest import REPO
from fairseq_plugins.scripts import augment_sources as aug

CORPUS = ["a dog runs in the park .", "a man runs in the street .", "a dog sits on the grass .",
          "two men sit on the bench .", "a woman walks in the park ."]


def test_words_of_groups_sentencepiece_and_subword_nmt_pieces():
    assert aug.words_of("▁Se veral ▁men , ▁too .") == [("▁Se", "veral"), ("▁men", ","), ("▁too", ".")]
    assert aug.words_of("se@@ ver@@ al men , too") == [("se@@", "ver@@", "al"), ("men",), (",",), ("too",)]
    assert aug.words_of("a dog") == [("a",), ("dog",)]


def test_every_substitute_was_seen_between_the_same_neighbours():
    contexts = {}
    for line in CORPUS:
        words = ["<s>", *line.split(), "<s>"]
        for i in range(1, len(words) - 1):
            contexts.setdefault((words[i - 1], words[i + 1]), set()).add(words[i])
    new = aug.augment(CORPUS, copies=5, seed=3, max_substitutions=1)
    assert new and len(new) == len(set(new)) and not set(new) & set(CORPUS)
    for line in new:
        words = ["<s>", *line.split(), "<s>"]
        diffs = {source: [i for i, (a, b) in enumerate(zip(source.split(), line.split()), 1) if a != b]
                 for source in CORPUS if len(source.split()) == len(line.split())}
        assert any(len(d) == 1 and words[d[0]] in contexts[words[d[0] - 1], words[d[0] + 1]]
                   for d in diffs.values()), line


def test_keeps_the_segmentation_and_is_reproducible():
    pieces = ["▁a ▁do g ▁run s .", "▁a ▁ma n ▁run s .", "▁a ▁do g ▁sit s .", "▁the ▁ma n ▁sit s ."]
    # (n, s) holds ▁run and ▁sit, (<s>, ▁ma) ▁a and ▁the: whole pieces swapped, one a sentence
    allowed = {"▁a ▁ma n ▁sit s .", "▁the ▁ma n ▁run s ."}
    runs = [aug.augment(pieces, copies=3, seed=seed) for seed in range(4)]
    assert all(run and set(run) <= allowed for run in runs)
    assert set().union(*runs) == allowed
    assert runs[1] == aug.augment(pieces, copies=3, seed=1)
    assert aug.augment(["▁one ▁line ▁only ."], copies=2) == []  # no context seen twice: nothing new


def test_command_line_errors_are_one_line(tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "fairseq_plugins.scripts.augment_sources", *map(str, args)],
                              cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    proc = run(tmp_path / "missing.txt", tmp_path / "out.txt")
    assert proc.returncode != 0 and "cannot read" in proc.stderr and "Traceback" not in proc.stderr
    (tmp_path / "in.txt").write_text("\n".join(CORPUS) + "\n")
    proc = run(tmp_path / "in.txt", tmp_path / "out.txt", "--copies", 0)
    assert proc.returncode != 0 and "at least 1" in proc.stderr
    proc = run(tmp_path / "in.txt", tmp_path / "out.txt", "--copies", 2)
    assert proc.returncode == 0
    assert (tmp_path / "out.txt").read_text().splitlines() == aug.augment(CORPUS, copies=2, seed=1)
