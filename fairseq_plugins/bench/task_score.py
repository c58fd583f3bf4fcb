"""The score column of the latency harness (``--score``): sacreBLEU against the split's target side (``bleu``,
the default), or a grammatical-error-correction test set's own score, computed by
``fairseq_plugins.scripts.gec_score`` on each row's detokenized outputs in sentence order:

* ``jfleg``: GLEU against the 4 references of JFLEG dev (the split must be JFLEG dev, e.g. ``test`` of
  ``recipes/data/prepare-gec-synthetic.sh``);
* ``conll2013``: edit F0.5 against the gold edits of CoNLL-2013's ``.m2`` (the split: CoNLL-2013, ``test1``).

The references are read from gec_score's data folder (``--score-data-dir``, else ``GEC_DATA_DIR``, else
``../shared/data`` beside the repository); with ``--max-sentences N`` the first N sentences are scored against
their own references.
"""
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from fairseq_plugins_compat.errors import PluginError

SCORES = ("bleu", "jfleg", "conll2013")
TEST_SETS = {"jfleg": "JFLEG dev", "conll2013": "CoNLL-2013"}  # the split each GEC score needs
HEADERS = {"bleu": "BLEU", "jfleg": "GLEU (JFLEG dev)", "conll2013": "F0.5 (CoNLL-2013)"}
DESCRIPTIONS = {
    "bleu": "sacreBLEU on detokenized output",
    "jfleg": "GLEU of the detokenized output against the 4 JFLEG dev references (gec_score: the gleu package, "
             "500 reference samples)",
    "conll2013": "edit F0.5 of the detokenized output against the CoNLL-2013 gold edits (gec_score's edit "
                 "matcher, not the official M2 scorer)",
}


@dataclass
class TaskScore:
    """A GEC score of outputs: ``score(ids, texts)`` scores the detokenized ``texts`` (one a sentence) of the
    split's sentences ``ids`` against those sentences' references."""

    name: str
    compute: Callable[[Sequence[int], Sequence[str]], float]
    _cache: Dict[Tuple, float] = field(default_factory=dict)  # rows with the same outputs are scored once

    @property
    def header(self) -> str:
        return HEADERS[self.name]

    def score(self, ids: Sequence[int], texts: Sequence[str]) -> float:
        key = (tuple(ids), tuple(texts))
        if key not in self._cache:
            self._cache[key] = self.compute(ids, texts)
        return self._cache[key]


def data_dir(given: Optional[str]) -> Path:
    """``--score-data-dir``, else gec_score's default folder."""
    from fairseq_plugins.scripts import gec_score

    return Path(given) if given else gec_score.default_data_dir()


def reference_files(name: str, folder: Path) -> List[Path]:
    """The files the score ``name`` reads from ``folder`` (none for ``bleu``)."""
    from fairseq_plugins.scripts import gec_score

    if name == "jfleg":
        source, references = gec_score.jfleg_files(folder, "dev")
        return [source, *references]
    if name == "conll2013":
        return [gec_score.conll2013_file(folder)]
    return []


def reference_problem(name: str, folder: Path) -> Optional[str]:
    """One line naming the missing reference files of score ``name`` (None: all present)."""
    missing = [str(path) for path in reference_files(name, folder) if not path.is_file()]
    if not missing:
        return None
    return (f"--score {name}: no references: {', '.join(missing)} missing (set --score-data-dir or GEC_DATA_DIR "
            "to the folder holding jfleg/dev/ and conll2013/revised/)")


def load(name: str, folder: Path, split_sentences: int, split: str) -> Optional[TaskScore]:
    """The score ``name`` with its references read from ``folder`` (None for ``bleu``: the harness's own
    sacreBLEU); the references must count as many sentences as the split being decoded."""
    from fairseq_plugins.scripts import gec_score

    if name == "bleu":
        return None
    problem = reference_problem(name, folder)
    if problem:
        raise PluginError(problem)
    if name == "jfleg":
        source_path, reference_paths = gec_score.jfleg_files(folder, "dev")
        sources = gec_score.read_lines(source_path)
        references = [gec_score.read_lines(path) for path in reference_paths]

        def compute(ids, texts):
            return gec_score.gleu([sources[i] for i in ids], list(texts), [[ref[i] for i in ids] for ref in references])

        count = len(sources)
    else:
        m2 = gec_score.read_m2(gec_score.conll2013_file(folder))

        def compute(ids, texts):
            return gec_score.score_m2(list(texts), [m2[i] for i in ids])["F0.5"]

        count = len(m2)
    if count != split_sentences:
        raise PluginError(f"--score {name}: the references in {folder} have {count} sentences, the {split} split "
                          f"{split_sentences} (--gen-subset must be the {TEST_SETS[name]} split)")
    return TaskScore(name, compute)
