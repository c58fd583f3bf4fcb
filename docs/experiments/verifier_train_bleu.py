"""Has the demo verifier learnt its training set by heart?  Its greedy BLEU (sacreBLEU) on 1,000 of its Multi30k
training sources (every 29th) against their references, beside test2016's.  Read with acceptance_model.py: a
drafter that agrees with the verifier more on training sources than on test sentences has overfitted, unless the
verifier's outputs are themselves more regular there.

    RUNS=... python docs/experiments/verifier_train_bleu.py     # $RUNS/m30raw: the raw text (docs/results.md)
"""
import sacrebleu
import torch

import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)

torch.set_num_threads(1)
t = demo_pair.load(sentencepiece_model="checkpoints/demo/sentencepiece.model")
for split in ("train", "test"):
    sources = open(f"{demo_pair.RUNS}/m30raw/{split}.en").read().splitlines()
    references = open(f"{demo_pair.RUNS}/m30raw/{split}.de").read().splitlines()
    picked = list(range(0, len(sources), max(1, len(sources) // 1000)))[:1000]
    hypotheses = [t.translate([sources[i]])[0] for i in picked]
    bleu = sacrebleu.corpus_bleu(hypotheses, [[references[i] for i in picked]]).score
    print(f"{split}: {len(picked)} sentences, greedy BLEU {bleu:.2f}")
