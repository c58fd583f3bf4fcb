"""Joint sentencepiece model for the data recipes: ``train`` and ``encode`` (stdin -> stdout).

    python recipes/lib/spm.py train --input a.en,a.de --model-prefix DIR/spm --vocab-size 8000
    python recipes/lib/spm.py encode --model DIR/spm.model < in.txt > out.spm
    python recipes/lib/spm.py decode --model DIR/spm.model < out.spm > in.txt
"""
import argparse
import sys

import sentencepiece as spm


def train(args):
    spm.SentencePieceTrainer.train(
        input=args.input, model_prefix=args.model_prefix, vocab_size=args.vocab_size,
        model_type=args.model_type, character_coverage=args.character_coverage,
        input_sentence_size=args.input_sentence_size, shuffle_input_sentence=True,
        hard_vocab_limit=not args.soft_vocab_limit, num_threads=args.num_threads,
        # fairseq's dictionary adds its own <s>/<pad>/</s>/<unk>; keep only unk in the pieces
        bos_id=-1, eos_id=-1, pad_id=-1, unk_id=0, minloglevel=1,
    )


def encode(args):
    sp = spm.SentencePieceProcessor(model_file=args.model)
    out = sys.stdout
    for line in sys.stdin:
        out.write(" ".join(sp.encode(line.strip(), out_type=str)) + "\n")


def decode(args):
    sp = spm.SentencePieceProcessor(model_file=args.model)
    for line in sys.stdin:
        sys.stdout.write(sp.decode(line.split()) + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("train")
    p.add_argument("--input", required=True, help="comma-separated text files")
    p.add_argument("--model-prefix", required=True)
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--model-type", default="unigram", choices=["unigram", "bpe", "char", "word"])
    p.add_argument("--character-coverage", type=float, default=1.0)
    p.add_argument("--input-sentence-size", type=int, default=10_000_000)
    p.add_argument("--soft-vocab-limit", action="store_true", help="allow fewer pieces (tiny corpora)")
    p.add_argument("--num-threads", type=int, default=1)
    p.set_defaults(func=train)
    for name, func in (("encode", encode), ("decode", decode)):
        p = sub.add_parser(name)
        p.add_argument("--model", required=True)
        p.set_defaults(func=func)
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
