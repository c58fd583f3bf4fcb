"""Joint sentencepiece model for the data recipes: ``train`` and ``encode`` (stdin -> stdout).

    python recipes/lib/spm.py train --input a.en,a.de --model-prefix DIR/spm --vocab-size 8000
    python recipes/lib/spm.py encode --model DIR/spm.model < in.txt > out.spm
    python recipes/lib/spm.py decode --model DIR/spm.model < out.spm > in.txt
    python recipes/lib/spm.py check --model M.model --dict dict.en.txt --input train.en
        # one line and exit 1 when the model's pieces are not the dictionary's
    python recipes/lib/spm.py strip-paths --model M.model --output shipped.model
        # the same pieces without the trainer's input files and output prefix (paths of the machine that made it)
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


def dictionary_symbols(path):
    """The symbols of a fairseq dictionary file (``symbol count [#fairseq:overwrite]`` lines)."""
    with open(path, encoding="utf-8") as f:
        return {line.split()[0] for line in f if line.strip()}


def unknown_rate(model, symbols, lines):
    """Share of the pieces of ``lines`` (model-encoded) missing from ``symbols`` or unknown to the model."""
    try:
        sp = spm.SentencePieceProcessor(model_file=model)
    except (OSError, RuntimeError) as error:
        sys.exit(f"{model}: not a sentencepiece model ({str(error).splitlines()[0]})")
    unk = sp.id_to_piece(sp.unk_id())
    pieces = [piece for line in lines for piece in sp.encode(line.strip(), out_type=str)]
    missing = sum(piece == unk or piece not in symbols for piece in pieces)
    return missing / max(1, len(pieces)), len(pieces)


def check(args):
    """A dictionary built on text encoded with another model has most pieces unknown."""
    with open(args.input, encoding="utf-8") as f:
        lines = [line for _, line in zip(range(args.lines), f)]
    rate, total = unknown_rate(args.model, dictionary_symbols(args.dict), lines)
    if rate > args.max_unknown:
        sys.exit(f"{args.model} does not fit {args.dict}: {100 * rate:.1f}% of the {total} pieces of the first "
                 f"{len(lines)} lines of {args.input} are not in the dictionary (limit {100 * args.max_unknown:g}%): "
                 "use the sentencepiece model the dictionary was built with")
    print(f"{args.model} fits {args.dict}: {100 * rate:.2f}% of {total} pieces of {args.input} unknown", file=sys.stderr)


TRAINER_SPEC, INPUT, MODEL_PREFIX = 2, 1, 2  # ModelProto.trainer_spec; TrainerSpec.input and .model_prefix


def read_varint(data: bytes, i: int):
    """The protobuf varint at ``data[i:]`` and the index after it."""
    value = shift = 0
    while True:
        value |= (data[i] & 0x7F) << shift
        shift += 7
        i += 1
        if data[i - 1] < 0x80:
            return value, i


def encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append((value & 0x7F) | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


def protobuf_fields(data: bytes):
    """(field number, wire type, the field's raw bytes, payload of a length-delimited field) of a message; no
    protobuf package needed."""
    i = 0
    while i < len(data):
        start = i
        key, i = read_varint(data, i)
        number, wire = key >> 3, key & 7
        payload = None
        if wire == 0:
            _, i = read_varint(data, i)
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        elif wire == 2:
            size, i = read_varint(data, i)
            payload, i = data[i: i + size], i + size
        else:
            raise ValueError(f"protobuf wire type {wire}")
        yield number, wire, data[start: i], payload


def without_paths(model: bytes) -> bytes:
    """A serialized sentencepiece model without TrainerSpec.input and .model_prefix."""
    out = bytearray()
    for number, wire, raw, payload in protobuf_fields(model):
        if number == TRAINER_SPEC and wire == 2:
            spec = b"".join(r for n, _, r, _ in protobuf_fields(payload) if n not in (INPUT, MODEL_PREFIX))
            raw = encode_varint(TRAINER_SPEC << 3 | 2) + encode_varint(len(spec)) + spec
        out += raw
    return bytes(out)


def pieces(model_proto: bytes):
    sp = spm.SentencePieceProcessor(model_proto=model_proto)
    return [sp.id_to_piece(i) for i in range(sp.get_piece_size())]


def strip_paths(args):
    with open(args.model, "rb") as f:
        model = f.read()
    try:
        stripped = without_paths(model)
        same = pieces(model) == pieces(stripped)
    except (ValueError, IndexError, RuntimeError) as error:
        sys.exit(f"{args.model}: not a sentencepiece model ({str(error).splitlines()[0]})")
    if not same:
        sys.exit(f"{args.model}: its copy without paths has other pieces")
    with open(args.output, "wb") as f:
        f.write(stripped)


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
    p = sub.add_parser("check", help="does the model's segmentation fit a fairseq dictionary?")
    p.add_argument("--model", required=True)
    p.add_argument("--dict", required=True, help="fairseq dictionary (dict.LANG.txt)")
    p.add_argument("--input", required=True, help="raw text in the dictionary's language")
    p.add_argument("--lines", type=int, default=1000, help="lines of --input to encode")
    p.add_argument("--max-unknown", type=float, default=0.05, help="largest share of unknown pieces accepted")
    p.set_defaults(func=check)
    p = sub.add_parser("strip-paths", help="the model without the paths its trainer recorded (same pieces)")
    p.add_argument("--model", required=True)
    p.add_argument("--output", required=True)
    p.set_defaults(func=strip_paths)
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
