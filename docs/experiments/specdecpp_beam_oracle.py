"""Where SpecDec++'s BLEU comes from: its relaxed rule lets the drafts change the output, so what the drafts know
decides whether it rises above greedy's.  Decodes a Multi30k split (argv[1]: valid | test) with the demo verifier's
``specdec++`` (argv[2]: beta, argv[3]: tau), the demo drafter replaced by an oracle that drafts, position by
position, a fixed translation of each sentence (``bench.oracle.OracleDrafter``): the verifier's own greedy output
(the control: the result must be greedy's), then its beam-5 output (a better translation than greedy's, 31.64 vs
30.75 BLEU on test2016).  Prints tokens per iteration and sacreBLEU of greedy, of both oracles, and of the demo drafter.

The translations come from ``fairseq-generate $RUNS/multi30k/bin --user-dir fairseq_plugins --path
checkpoints/demo/verifier.pt -s en -t de --gen-subset SPLIT --max-len-a 1.2 --max-len-b 10 --cpu --batch-size 1
--beam B``, its H- lines (sentencepiece pieces) sorted by id, in ``$RUNS/s61/SPLIT-beamB.pieces``.  Run from the
repository root: ``RUNS=... python docs/experiments/specdecpp_beam_oracle.py valid 3 1``."""
import sys

import sacrebleu
import torch

import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)
from fairseq_plugins import inference
from fairseq_plugins.bench.oracle import OracleDrafter

split, beta, tau = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
translator = demo_pair.load(decoding="specdec++", beta=beta, tau=tau,
                            sentencepiece_model="checkpoints/demo/sentencepiece.model")
sources = [line.rstrip("\n") for line in open(f"{demo_pair.RUNS}/m30raw/{split}.en")]
references = [line.rstrip("\n") for line in open(f"{demo_pair.RUNS}/m30raw/{split}.de")]
tgt_dict, src_dict = translator.task.target_dictionary, translator.task.source_dictionary


def translations(beam: int):
    """The verifier's beam-``beam`` translation of each source: token ids (EOS appended)."""
    pieces = open(f"{demo_pair.RUNS}/s61/{split}-beam{beam}.pieces").read().splitlines()
    return [inference.encode(tgt_dict, p) for p in pieces]


def oracle_of(tokens) -> OracleDrafter:
    """An oracle drafting ``tokens[i]`` for source i."""
    targets = {tuple(translator.encode(s).tolist()): t for s, t in zip(sources, tokens)}
    return OracleDrafter(targets, src_dict.pad(), tgt_dict.pad())


def detok(tokens):
    return [tgt_dict.string(t, bpe_symbol="sentencepiece") for t in tokens]


def bleu(lines) -> float:
    return sacrebleu.corpus_bleu(lines, [references]).score


greedy_tokens, beam5_tokens = translations(1), translations(5)
greedy, beam5 = detok(greedy_tokens), detok(beam5_tokens)
print(f"{split}: greedy BLEU {bleu(greedy):.2f}, beam 5 {bleu(beam5):.2f}; specdec++ beta {beta} tau {tau}:")
demo_drafter = translator.generator.drafter
for name, drafter in [("greedy oracle", oracle_of(greedy_tokens)), ("beam-5 oracle", oracle_of(beam5_tokens)),
                      ("demo drafter", demo_drafter)]:
    with torch.no_grad():
        lines, tokens_per_iteration, _ = demo_pair.decode_with(translator, sources, drafter)
    differ = sum(a != b for a, b in zip(lines, greedy))
    print(f"  {name}: BLEU {bleu(lines):.2f}, {tokens_per_iteration:.2f} tokens/iteration, {differ} differ from greedy, "
          f"{sum(len(l.split()) for l in lines)} words (greedy {sum(len(l.split()) for l in greedy)})")
