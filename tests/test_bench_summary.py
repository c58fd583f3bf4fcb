import sacrebleu

from fairseq_plugins.bench.summary import bleu


def test_bleu_keeps_sacrebleus_full_precision_and_needs_references():
    """The harnesses' JSON keeps the unrounded score (their tables round it): a -1.0005 difference
    between two systems must not read as -1.00."""
    hypotheses = ["the cat sat on the mat today", "a dog runs"]
    references = ["the cat sat on a mat today", "a dog runs fast"]
    score = sacrebleu.corpus_bleu(hypotheses, [references]).score
    assert round(score, 2) != score  # the example needs more than two decimals to tell
    assert bleu(hypotheses, references) == score
    assert bleu(hypotheses, None) is None
