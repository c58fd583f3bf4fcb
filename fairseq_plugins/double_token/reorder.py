"""Target orders of the double-token paper (section 3.2) and their exact inverses.

A sentence ``y_1 .. y_n`` (no eos) is rewritten into its *decoding order*, the sequence the
decoder emits, ``k`` tokens per step (``k`` = ``TOKENS_PER_STEP[order]``):

- ``bidirectional``: left half ``y_1 .. y_ceil(n/2)`` and reversed right half are interleaved
  ``(L1, R1), (L2, R2), ...``; the left half takes the middle token of an odd-length sentence.
- ``double_l2r`` / ``double_r2l``: two contiguous tokens per step, natural / reversed order.
- ``single_l2r`` / ``single_r2l``: one token per step (standard decoding; R2L is reversed).

End of decoding (EOD): one or two EOD tokens are appended so that the length is a multiple
of ``k`` (always at least one). **EOD is the dictionary's eos symbol**: eos is never a target
token otherwise (only ``y_R0`` of the start pair ``(bos, eos)`` is eos, and it is an input),
so dictionaries, binarized data and checkpoints stay stock fairseq.

The inverse reads units of ``k`` tokens up to and including the first unit that holds an
EOD and keeps that unit's non-EOD tokens, so any generated sequence maps to a sentence.
"""
TOKENS_PER_STEP = {
    "bidirectional": 2,  # the paper's method: head and tail token per step
    "double_l2r": 2,  # comparison system: two contiguous tokens, left to right
    "double_r2l": 2,  # comparison system: two contiguous tokens, right to left
    "single_l2r": 1,  # standard decoding (same model code, for a same-size baseline)
    "single_r2l": 1,  # standard decoding of the reversed sentence
}
TARGET_ORDERS = tuple(TOKENS_PER_STEP)


def _interleave_halves(tokens):
    """``[y1..yn]`` -> ``[L1, R1, L2, R2, ...]`` with ``L = y[:ceil(n/2)]``, ``R = reversed(y[ceil(n/2):])``."""
    half = (len(tokens) + 1) // 2
    left, right = tokens[:half], tokens[half:][::-1]
    out = []
    for i, token in enumerate(left):
        out.append(token)
        if i < len(right):
            out.append(right[i])
    return out


def to_decoding_order(tokens, order, eod):
    """Sentence (list of ids, no eos) -> decoding order, padded with EOD to a multiple of k.

    >>> to_decoding_order([1, 2, 3, 4, 5], "bidirectional", eod=0)
    [1, 5, 2, 4, 3, 0]
    """
    tokens = list(tokens)
    if order == "bidirectional":
        seq = _interleave_halves(tokens)
    elif order in ("double_r2l", "single_r2l"):
        seq = tokens[::-1]
    elif order in ("double_l2r", "single_l2r"):
        seq = tokens
    else:
        raise ValueError(f"unknown target order {order!r}")
    k = TOKENS_PER_STEP[order]
    return seq + [eod] * (k - len(seq) % k)


def natural_indices(seq, order, eod):
    """Where each sentence token sits in a decoding-order ``seq``.

    Returns ``(indices, eod_indices)``: ``[seq[i] for i in indices]`` is the sentence, and
    ``eod_indices`` are the EOD positions of the final unit (empty if ``seq`` has no EOD).
    """
    k = TOKENS_PER_STEP[order]
    kept, eods = [], []
    for start in range(0, len(seq), k):
        unit = range(start, min(start + k, len(seq)))
        kept += [i for i in unit if seq[i] != eod]
        eods = [i for i in unit if seq[i] == eod]
        if eods:
            break
    if order == "bidirectional":
        kept = [i for i in kept if i % 2 == 0] + [i for i in kept if i % 2 == 1][::-1]
    elif order in ("double_r2l", "single_r2l"):
        kept = kept[::-1]
    return kept, eods


def from_decoding_order(seq, order, eod):
    """Inverse of :func:`to_decoding_order` (also defined for any generated ``seq``)."""
    indices, _ = natural_indices(list(seq), order, eod)
    return [seq[i] for i in indices]
