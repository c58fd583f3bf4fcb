"""``fairseq-score`` for sacrebleu 2.x.

fairseq 0.12.2 passes file objects to ``sacrebleu.corpus_bleu`` (2.x wants lists of
strings) and builds its sentence-level scorer with the pre-0.10 ``Scorer(pad, eos, unk)``
signature.  This ``cli_main`` keeps the CLI's options and output format and fixes both.
"""
import os
import sys

import sacrebleu


def needs_score_shim(version=None):
    return int((version or sacrebleu.__version__).split(".")[0]) >= 2


def _read_lines(path_or_stream, ignore_case):
    lines = [line.rstrip("\n") for line in path_or_stream]
    return [line.lower() for line in lines] if ignore_case else lines


def _token_scorer(dictionary):
    from fairseq.scoring import bleu

    return bleu.Scorer(bleu.BleuConfig(pad=dictionary.pad(), eos=dictionary.eos(), unk=dictionary.unk()))


def main(args):
    from fairseq.data.dictionary import Dictionary

    if args.sys != "-" and not os.path.exists(args.sys):
        sys.exit(f"fairseq-score: error: system output file {args.sys} does not exist")
    if not os.path.exists(args.ref):
        sys.exit(f"fairseq-score: error: reference file {args.ref} does not exist")
    with open(args.ref, encoding="utf-8") as f:
        refs = _read_lines(f, args.ignore_case)
    if args.sys == "-":
        hyps = _read_lines(sys.stdin, args.ignore_case)
    else:
        with open(args.sys, encoding="utf-8") as f:
            hyps = _read_lines(f, args.ignore_case)
    if len(hyps) != len(refs):
        sys.exit(f"fairseq-score: error: {len(hyps)} system lines but {len(refs)} reference lines")

    if args.sacrebleu:
        print(sacrebleu.corpus_bleu(hyps, [refs]).format())
        return
    dictionary = Dictionary()
    scorer = _token_scorer(dictionary)
    for i, (hyp, ref) in enumerate(zip(hyps, refs)):
        if args.sentence_bleu:
            scorer.reset(one_init=True)
        scorer.add(dictionary.encode_line(ref), dictionary.encode_line(hyp))
        if args.sentence_bleu:
            print(i, scorer.result_string(args.order))
    if not args.sentence_bleu:
        print(scorer.result_string(args.order))


def make_cli_main(get_parser):
    """``fairseq_cli.score.cli_main`` with fairseq's own argument parser."""

    def cli_main():
        args = get_parser().parse_args()
        print(args)
        main(args)

    return cli_main
