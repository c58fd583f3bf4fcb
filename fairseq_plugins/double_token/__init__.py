"""Double-token bidirectional decoding (Imamura & Sumita): target reordering, the
training-batch wrapper and the pair-wise greedy / beam search (paper's Algorithm 1).

The registered pieces live in ``tasks/double_token_translation.py`` (``--task
double_token_translation``) and ``models/double_token_transformer.py``; this subpackage
holds what they share and is not imported by fairseq on its own.
"""
