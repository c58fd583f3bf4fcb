"""Scores of a grammatical-error-correction output: JFLEG (BLEU, GLEU) and CoNLL-2013 (edit P/R/F0.5).

    python -m fairseq_plugins.scripts.gec_score jfleg --hyp out.jfleg.txt
    python -m fairseq_plugins.scripts.gec_score conll2013 --hyp out.conll.txt
    python -m fairseq_plugins.scripts.gec_score jfleg --copy        # the copy-the-input baseline
    python -m fairseq_plugins.scripts.gec_score m2-target FILE.m2   # annotator 0's corrected sentences

Hypotheses: one sentence a line, in the order of the test set's sources, tokenized as those sources are
(both sets are space-tokenized, "do n't", "it 's"); or a fairseq-generate output (its H- lines, by id).

* ``jfleg``: sacreBLEU (13a, cased) against the 4 references, and GLEU (Napoles et al. 2015/2016, n = 4,
  500 reference samples with the seeds of the original script) from the ``gleu`` package.
* ``conll2013``: precision, recall and F0.5 of the hypothesis's edits against the gold edits of an ``.m2`` file.
  No MaxMatch (M2) scorer is installable from a package registry, so this is a small edit matcher, not the
  official M2 scorer: the hypothesis's edits are the differing regions of a token alignment with the source
  (difflib); regions and gold edits that overlap or touch are judged together: when the largest subset of
  those gold edits that gives the same sentence as the regions has k edits, k are proposed and correct, else
  each region is one wrong proposal. M2 searches more segmentations of the hypothesis's edits (a partly right
  region earns partial credit there), so its figures can be higher; the gold corrections themselves score
  F0.5 99.6 here on CoNLL-2013, not 100. Compare systems with this scorer only, not with published M2 figures.

Defaults read the data of ``../shared/data`` beside the repository (``--data-dir`` or ``GEC_DATA_DIR`` change it).
"""
import argparse
import difflib
import itertools
import os
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parents[2]


def default_data_dir() -> Path:
    return Path(os.environ.get("GEC_DATA_DIR", REPO.parent / "shared" / "data"))


def read_lines(path) -> List[str]:
    """Lines of ``path`` without the trailing spaces of JFLEG's dev files."""
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n").strip() for line in f]


def read_hypotheses(path) -> List[str]:
    """One hypothesis a line, or a fairseq-generate output: its "H-<id>\tscore\ttext" lines in id order."""
    lines = read_lines(path)
    if not any(line.startswith("H-") for line in lines):
        return lines
    found = {}
    for line in lines:
        if line.startswith("H-"):
            name, _, text = (line.split("\t", 2) + ["", ""])[:3]
            found[int(name[2:])] = text.strip()
    return [found[i] for i in sorted(found)]


# --- JFLEG: BLEU and GLEU ------------------------------------------------------------------------------

def bleu(hyps: Sequence[str], refs: Sequence[Sequence[str]]) -> float:
    """Corpus sacreBLEU (13a, cased) of ``hyps`` against the reference sets ``refs`` (n_refs x n_sentences)."""
    import sacrebleu

    return sacrebleu.corpus_bleu(list(hyps), [list(r) for r in refs], force=True).score   # tokenized on purpose


def gleu(srcs: Sequence[str], hyps: Sequence[str], refs: Sequence[Sequence[str]], iterations: int = 500) -> float:
    """Corpus GLEU x 100 (word 4-grams; the mean over ``iterations`` samples of one reference per sentence,
    drawn with the original script's seeds)."""
    import numpy as np
    from gleu.corpus_main import drn_accum_to_gleu
    from gleu.count import set_tokenization
    from gleu.load import load_hdrn_data
    from gleu.util import make_id_rindex

    set_tokenization("word")
    with tempfile.TemporaryDirectory() as tmp:
        def write(name, lines):
            path = os.path.join(tmp, name)
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(line + "\n" for line in lines)
            return path

        args = argparse.Namespace(n=4, source_path=write("src", srcs), hyp_path_list=[write("hyp", hyps)],
                                  ref_path_list=[write(f"ref{i}", r) for i, r in enumerate(refs)])
        _, _, _, dr_rlen, dh_hlen, hdrn_accum = load_hdrn_data(args)
    rindex = make_id_rindex(iterations, len(srcs), len(refs), True)
    scores = [drn_accum_to_gleu(hdrn_accum[0], d_rindex, dr_rlen, dh_hlen[:, 0]) for d_rindex in rindex]
    return 100 * float(np.mean(scores))


def score_jfleg(hyps: Sequence[str], srcs: Sequence[str], refs: Sequence[Sequence[str]]) -> Dict[str, float]:
    check_lengths(hyps, srcs)
    return {"BLEU": bleu(hyps, refs), "GLEU": gleu(srcs, hyps, refs)}


# --- CoNLL-2013: edit precision / recall / F0.5 ----------------------------------------------------------

class Edit(NamedTuple):
    """Source tokens [start, end) replaced by ``words`` (a tuple of tokens; empty: a deletion)."""
    start: int
    end: int
    words: Tuple[str, ...]


class M2Sentence(NamedTuple):
    source: List[str]
    annotators: Dict[int, List[Edit]]   # annotator id -> its edits (noop edits left out)


def read_m2(path) -> List[M2Sentence]:
    """The sentences of an .m2 file; an edit with alternatives ("a||b") keeps the first."""
    sentences: List[M2Sentence] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("S "):
                sentences.append(M2Sentence(line[2:].split(), {}))
            elif line.startswith("A "):
                span, kind, correction, *_, annotator = line[2:].split("|||")
                edits = sentences[-1].annotators.setdefault(int(annotator), [])
                start, end = map(int, span.split())
                if kind != "noop" and start >= 0:
                    words = "" if correction == "-NONE-" else correction.split("||")[0]
                    edits.append(Edit(start, end, tuple(words.split())))
    for sentence in sentences:   # a sentence without any "A" line has no edit for annotator 0
        sentence.annotators.setdefault(0, [])
    return sentences


def apply_edits(source: Sequence[str], edits: Sequence[Edit]) -> List[str]:
    """``source`` with non-overlapping ``edits`` applied."""
    out, at = [], 0
    for edit in sorted(edits, key=lambda e: (e.start, e.end)):
        out += source[at:edit.start]
        out += edit.words
        at = max(at, edit.end)
    return out + list(source[at:])


def hypothesis_edits(source: Sequence[str], hyp: Sequence[str]) -> List[Edit]:
    """The differing regions of a token alignment of ``source`` with ``hyp``."""
    matcher = difflib.SequenceMatcher(None, list(source), list(hyp), autojunk=False)
    return [Edit(i1, i2, tuple(hyp[j1:j2])) for op, i1, i2, j1, j2 in matcher.get_opcodes() if op != "equal"]


def linked(a: Edit, b: Edit) -> bool:
    """Spans share a token or touch (an edit right after the other, an insertion at the other's edge)."""
    return a.start <= b.end and b.start <= a.end


def clusters(hyp_edits: Sequence[Edit], gold: Sequence[Edit]) -> List[Tuple[List[Edit], List[Edit]]]:
    """Groups of (hypothesis edits, gold edits) joined by :func:`linked`, in source order."""
    items = [(e, True) for e in hyp_edits] + [(e, False) for e in gold]
    group = list(range(len(items)))

    def root(i):
        while group[i] != i:
            group[i] = group[group[i]]
            i = group[i]
        return i

    for i, (a, _) in enumerate(items):
        for j in range(i):
            if linked(a, items[j][0]):
                group[root(i)] = root(j)
    found: Dict[int, Tuple[List[Edit], List[Edit]]] = {}
    for i, (edit, is_hyp) in enumerate(items):
        found.setdefault(root(i), ([], []))[0 if is_hyp else 1].append(edit)
    return sorted(found.values(), key=lambda hg: min(e.start for e in hg[0] + hg[1]))


def matching_subset(source: Sequence[str], hyp_group: Sequence[Edit], gold_group: Sequence[Edit],
                    max_gold: int = 8) -> int:
    """The size of the largest subset of ``gold_group`` whose edits give what ``hyp_group``'s give; 0 if none
    (subsets are searched up to ``max_gold`` gold edits, else only the whole group)."""
    target = apply_edits(source, hyp_group)
    sizes = range(len(gold_group), 0, -1) if len(gold_group) <= max_gold else [len(gold_group)]
    for size in sizes:
        for subset in itertools.combinations(gold_group, size):
            if apply_edits(source, subset) == target:
                return size
    return 0


def edit_counts(source: Sequence[str], hyp_edits: Sequence[Edit], gold: Sequence[Edit]) -> Tuple[int, int, int]:
    """(correct, proposed, gold) edit counts of one sentence (see the module docstring)."""
    correct = proposed = 0
    for hyp_group, gold_group in clusters(hyp_edits, gold):
        if not hyp_group:
            continue
        matched = matching_subset(source, hyp_group, gold_group)
        if matched:
            correct += matched
            proposed += matched
        else:
            proposed += len(hyp_group)
    return correct, proposed, len(gold)


def prf(correct: int, proposed: int, gold: int, beta: float = 0.5) -> Tuple[float, float, float]:
    """Precision, recall, F_beta; precision is 1 with nothing proposed, recall 1 with nothing to find (as M2)."""
    p = correct / proposed if proposed else 1.0
    r = correct / gold if gold else 1.0
    f = (1 + beta ** 2) * p * r / (beta ** 2 * p + r) if p + r else 0.0
    return p, r, f


def score_m2(hyps: Sequence[str], sentences: Sequence[M2Sentence]) -> Dict[str, float]:
    """Corpus P/R/F0.5 (x 100); per sentence, the annotator that gives the best running F0.5 (as M2)."""
    check_lengths(hyps, sentences)
    total = (0, 0, 0)
    for hyp, sentence in zip(hyps, sentences):
        edits = hypothesis_edits(sentence.source, hyp.split())
        options = [edit_counts(sentence.source, edits, gold) for gold in sentence.annotators.values()]
        total = max((tuple(t + c for t, c in zip(total, option)) for option in options),
                    key=lambda counts: (prf(*counts)[2], -counts[2]))
    p, r, f = prf(*total)
    return {"P": 100 * p, "R": 100 * r, "F0.5": 100 * f,
            "correct": total[0], "proposed": total[1], "gold": total[2]}


def check_lengths(hyps: Sequence, srcs: Sequence) -> None:
    if len(hyps) != len(srcs):
        raise SystemExit(f"gec_score: {len(hyps)} hypotheses for {len(srcs)} test sentences")


# --- command line ------------------------------------------------------------------------------------------

def jfleg_files(data_dir: Path, split: str) -> Tuple[Path, List[Path]]:
    return data_dir / "jfleg" / split / f"{split}.src", [data_dir / "jfleg" / split / f"{split}.ref{i}" for i in range(4)]


def conll2013_file(data_dir: Path) -> Path:
    return data_dir / "conll2013" / "revised" / "official-preprocessed.m2"


def format_scores(name: str, scores: Dict[str, float]) -> str:
    return name + "\t" + "\t".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in scores.items())


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("jfleg", "conll2013"):
        p = sub.add_parser(name, help=f"score a {name} output")
        hyp = p.add_mutually_exclusive_group(required=True)
        hyp.add_argument("--hyp", help="the output, one sentence a line, or fairseq-generate's ('-': stdin)")
        hyp.add_argument("--copy", action="store_true", help="score the sources themselves (copy baseline)")
        p.add_argument("--data-dir", type=Path, default=None, help="default: GEC_DATA_DIR or ../shared/data")
        if name == "jfleg":
            p.add_argument("--split", default="dev", help="dev (test: where present)")
            p.add_argument("--src", type=Path, help="sources (default: <data-dir>/jfleg/<split>/<split>.src)")
            p.add_argument("--refs", type=Path, nargs="+", help="references (default: the split's .ref0-3)")
        else:
            p.add_argument("--m2", type=Path, help="gold edits (default: the CoNLL-2013 revised .m2)")
    p = sub.add_parser("m2-target", help="print annotator 0's corrected sentences of an .m2 file")
    p.add_argument("m2", type=Path)
    args = parser.parse_args(argv)

    if args.command == "m2-target":
        for sentence in read_m2(args.m2):
            print(" ".join(apply_edits(sentence.source, sentence.annotators[min(sentence.annotators)])))
        return
    data_dir = args.data_dir or default_data_dir()
    hyps = None
    if args.hyp:
        hyps = read_hypotheses(sys.stdin.fileno() if args.hyp == "-" else args.hyp)
    if args.command == "jfleg":
        src_path, ref_paths = jfleg_files(data_dir, args.split)
        srcs = read_lines(args.src or src_path)
        refs = [read_lines(path) for path in (args.refs or ref_paths)]
        print(format_scores("copy" if args.copy else args.hyp, score_jfleg(srcs if args.copy else hyps, srcs, refs)))
    else:
        sentences = read_m2(args.m2 or conll2013_file(data_dir))
        if args.copy:
            hyps = [" ".join(s.source) for s in sentences]
        print(format_scores("copy" if args.copy else args.hyp, score_m2(hyps, sentences)))


if __name__ == "__main__":
    main()
