"""Small text tools for the data/eval recipes (stdin -> stdout unless noted).

    tok      --lang L --tool moses|13a|none [--lower] [--no-aggressive]   tokenize (moses: sacremoses, -a)
    detok    --lang L --tool moses|none                  undo moses tokenization
    norm-ro  [--remove-diacritics]                       Romanian normalisation (WMT16 en-ro, NAT setups)
    clean    SRC_IN TGT_IN SRC_OUT TGT_OUT --min 1 --max 250 --ratio 1.5 [--also IN OUT]...
                                                          drop empty/long/length-mismatched pairs
                                                          (--also: the same lines of a line-aligned file)
    compound-split                                        a-b -> a ##AT##-##AT## b (WMT14 en-de BLEU)
    xml-segs                                              IWSLT/WMT xml/sgm: the text of each <seg>
    strip-tags                                            IWSLT train.tags: drop metadata lines
"""
import argparse
import contextlib
import itertools
import re
import sys


def _moses(lang):
    try:
        import sacremoses
    except ImportError:
        sys.exit("text_tools: --tool moses needs the 'sacremoses' package (pip install sacremoses), "
                 "or set MOSES_SCRIPTS to a mosesdecoder/scripts checkout, or use TOKENIZER=13a|none")
    return sacremoses


def tok(args):
    if args.tool == "moses":
        sm = _moses(args.lang)
        norm, tk = sm.MosesPunctNormalizer(lang=args.lang), sm.MosesTokenizer(lang=args.lang)
        fn = lambda s: tk.tokenize(norm.normalize(s), aggressive_dash_splits=not args.no_aggressive,
                                   return_str=True, escape=False)
    elif args.tool == "13a":
        from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
        fn = Tokenizer13a()
    else:
        fn = lambda s: " ".join(s.split())
    for line in sys.stdin:
        out = fn(line.strip())
        sys.stdout.write((out.lower() if args.lower else out) + "\n")


def detok(args):
    if args.tool == "moses":
        d = _moses(args.lang).MosesDetokenizer(lang=args.lang)
        fn = lambda s: d.detokenize(s.replace(" @-@ ", "-").split())
    else:
        fn = lambda s: " ".join(s.split())
    for line in sys.stdin:
        sys.stdout.write(fn(line.strip()) + "\n")


RO_NORMALISE = str.maketrans({"Ş": "Ș", "ş": "ș", "Ţ": "Ț", "ţ": "ț", "„": '"', "”": '"', "“": '"', "«": '"', "»": '"'})
RO_NO_DIACRITICS = str.maketrans({"Ș": "S", "ș": "s", "Ț": "T", "ț": "t", "Ă": "A", "ă": "a", "Â": "A", "â": "a", "Î": "I", "î": "i"})


def norm_ro(args):
    for line in sys.stdin:
        line = line.translate(RO_NORMALISE)
        sys.stdout.write(line.translate(RO_NO_DIACRITICS) if args.remove_diacritics else line)


def clean(args):
    kept = total = 0
    with contextlib.ExitStack() as stack, open(args.src_in, encoding="utf-8") as fs, \
            open(args.tgt_in, encoding="utf-8") as ft, open(args.src_out, "w", encoding="utf-8") as os_, \
            open(args.tgt_out, "w", encoding="utf-8") as ot:
        # --also IN OUT: a file line-aligned with SRC_IN (e.g. the untokenized text): the kept lines, verbatim
        also = [(stack.enter_context(open(i, encoding="utf-8")), stack.enter_context(open(o, "w", encoding="utf-8")))
                for i, o in args.also]
        for s, t in itertools.zip_longest(fs, ft):
            if s is None or t is None:  # a truncated side (a partial download) would silently cut the corpus
                sys.exit(f"clean: {args.src_in} and {args.tgt_in} have different line counts (one ends after "
                         f"{total} lines)")
            total += 1
            extra = [fi.readline() for fi, _ in also]
            ns, nt = len(s.split()), len(t.split())
            if not (args.min <= ns <= args.max and args.min <= nt <= args.max):
                continue
            if max(ns, nt) > args.ratio * min(ns, nt):
                continue
            os_.write(" ".join(s.split()) + "\n")
            ot.write(" ".join(t.split()) + "\n")
            for line, (_, fo) in zip(extra, also):
                fo.write(line)
            kept += 1
    print(f"clean: kept {kept} of {total} pairs", file=sys.stderr)


COMPOUND = re.compile(r"(\S)-(\S)")


def compound_split(_args):
    for line in sys.stdin:
        sys.stdout.write(COMPOUND.sub(r"\1 ##AT##-##AT## \2", line))


SEG = re.compile(r"<seg[^>]*>\s*(.*?)\s*</seg>")
META_TAG = re.compile(r"^\s*</?(url|talkid|keywords|speaker|reviewer|translator|doc)\b")


def xml_segs(_args):
    """IWSLT/WMT dev/test xml or sgm: the text of every <seg>, one per line."""
    for line in sys.stdin:
        m = SEG.search(line)
        if m:
            sys.stdout.write(m.group(1).replace("\u2019", "'") + "\n")


def strip_tags(_args):
    """IWSLT train.tags files: drop metadata lines, unwrap <title>/<description>."""
    for line in sys.stdin:
        if META_TAG.match(line):
            continue
        text = re.sub(r"</?(title|description)>", "", line).strip().replace("\u2019", "'")
        if text:
            sys.stdout.write(text + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("tok"); p.add_argument("--lang", default="en")
    p.add_argument("--tool", default="moses", choices=["moses", "13a", "none"]); p.add_argument("--lower", action="store_true")
    p.add_argument("--no-aggressive", action="store_true", help="moses: keep intra-word hyphens (no -a)")
    p.set_defaults(func=tok)
    p = sub.add_parser("detok"); p.add_argument("--lang", default="en")
    p.add_argument("--tool", default="moses", choices=["moses", "13a", "none"]); p.set_defaults(func=detok)
    p = sub.add_parser("norm-ro"); p.add_argument("--remove-diacritics", action="store_true"); p.set_defaults(func=norm_ro)
    p = sub.add_parser("clean")
    for name in ("src_in", "tgt_in", "src_out", "tgt_out"):
        p.add_argument(name)
    p.add_argument("--min", type=int, default=1); p.add_argument("--max", type=int, default=250)
    p.add_argument("--ratio", type=float, default=1.5)
    p.add_argument("--also", nargs=2, action="append", default=[], metavar=("IN", "OUT"),
                   help="filter this line-aligned file the same way (repeatable)")
    p.set_defaults(func=clean)
    sub.add_parser("compound-split").set_defaults(func=compound_split)
    sub.add_parser("xml-segs").set_defaults(func=xml_segs)
    sub.add_parser("strip-tags").set_defaults(func=strip_tags)
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
