"""Where the bidirectional model loses BLEU to the single-token one: repeated words.

Reads two ``fairseq-generate`` outputs (``--remove-bpe sentencepiece``) of the same subset, e.g.::

    fairseq-generate $RUNS/multi30k/bin --user-dir fairseq_plugins --task double_token_translation \\
        --target-order bidirectional --source-lang en --target-lang de --gen-subset valid --beam 1 \\
        --path $RUNS/multi30k/double-token/bidirectional/checkpoint_best.pt --remove-bpe sentencepiece \\
        --max-len-a 1.2 --max-len-b 10 --batch-size 64 --cpu > gen_bidirectional.txt
    (the same with --target-order single_l2r and its checkpoint > gen_single_l2r.txt)
    python docs/experiments/double_token_repeats.py gen_bidirectional.txt gen_single_l2r.txt

and prints, per output: adjacent repeated words, repeated content words (> 3 characters) within a
sentence, sacreBLEU as decoded and with adjacent repeats collapsed; then a few examples."""
import collections
import sys

import sacrebleu


def read(path):
    hypotheses, references = {}, {}
    for line in open(path, encoding="utf-8"):
        if line.startswith("H-"):
            key, _, text = line.rstrip("\n").split("\t")
            hypotheses[int(key[2:])] = text
        elif line.startswith("T-"):
            key, text = line.rstrip("\n").split("\t")
            references[int(key[2:])] = text
    return hypotheses, references


def adjacent_repeats(text):
    words = text.split()
    return sum(a == b for a, b in zip(words, words[1:]))


def repeated_content_words(text):
    counts = collections.Counter(word for word in text.split() if len(word) > 3)
    return sum(count - 1 for count in counts.values())


def collapse(text):
    words = []
    for word in text.split():
        if not words or words[-1] != word:
            words.append(word)
    return " ".join(words)


outputs = [read(path) for path in sys.argv[1:]]
references = outputs[0][1]
ids = sorted(references)
print(f"references: {sum(adjacent_repeats(references[i]) for i in ids)} adjacent repeats, "
      f"{sum(repeated_content_words(references[i]) for i in ids)} repeated content words")
for path, (hypotheses, _) in zip(sys.argv[1:], outputs):
    as_decoded = sacrebleu.corpus_bleu([hypotheses[i] for i in ids], [[references[i] for i in ids]]).score
    collapsed = sacrebleu.corpus_bleu([collapse(hypotheses[i]) for i in ids], [[references[i] for i in ids]]).score
    print(f"{path}: {sum(adjacent_repeats(hypotheses[i]) for i in ids)} adjacent repeats, "
          f"{sum(repeated_content_words(hypotheses[i]) for i in ids)} repeated content words; "
          f"BLEU {as_decoded:.2f}, adjacent repeats collapsed {collapsed:.2f}")
first = outputs[0][0]
for i in [i for i in ids if adjacent_repeats(first[i])][:5]:
    print()
    for path, (hypotheses, _) in zip(sys.argv[1:], outputs):
        print(f"{path}: {hypotheses[i]}")
    print(f"reference: {references[i]}")
