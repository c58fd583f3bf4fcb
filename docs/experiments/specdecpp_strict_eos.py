"""Does SpecDec++ end sentences early by accepting a drafted EOS?  Decodes a Multi30k split (argv[1], raw text from
$RUNS/m30raw) with the demo pair's ``specdec++`` (beta 3, tau 1, its default drafts) and writes the detokenized
output to argv[3]; with argv[2] = 1 a drafted EOS passes only where it is the verifier's top choice (the paper's
rule otherwise).  Compare the two outputs and their BLEU (``sacrebleu REF -i A B -m bleu``).  Run from the repository
root: ``RUNS=... python docs/experiments/specdecpp_strict_eos.py valid 1 strict.txt`` (and ``valid 0 paper.txt``)."""
import sys

import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)
from fairseq_plugins.decoding import acceptance

split, strict, out = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
translator = demo_pair.load(decoding="specdec++", sentencepiece_model="checkpoints/demo/sentencepiece.model")
eos = translator.task.target_dictionary.eos()
papers_rule = acceptance.top_beta_accept


def strict_eos(drafts, lprobs, beta, tau):
    """The paper's rule, except that a drafted EOS must be the verifier's argmax."""
    return papers_rule(drafts, lprobs, beta, tau) & ((drafts != eos) | (drafts == lprobs[:, :-1].argmax(-1)))


if strict:
    acceptance.top_beta_accept = strict_eos  # choose_rule's lambda reads the module's function at each call
with open(f"{demo_pair.RUNS}/m30raw/{split}.en") as sources, open(out, "w") as f:
    for line in sources:
        f.write(translator.translate([line.rstrip("\n")])[0] + "\n")
