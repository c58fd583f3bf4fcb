"""Up-front check that a block drafter can serve a verifier (as CTranslate2 does for its
models): the decoder loop compares token ids, so both must speak the same dictionary.

:func:`check_compatibility` collects every problem and raises one
:class:`IncompatibleModelsError` listing them all, so a user fixes everything in one go.
"""
from typing import List, Optional

from fairseq_plugins_compat.errors import PluginError

SPECIAL_SYMBOLS = ("bos", "pad", "eos", "unk")


class IncompatibleModelsError(PluginError):
    """The drafter and the verifier cannot decode together; ``problems`` lists why."""

    def __init__(self, problems: List[str]):
        self.problems = list(problems)
        numbered = "; ".join(f"({i}) {problem}" for i, problem in enumerate(self.problems, 1))
        super().__init__(f"drafter and verifier are incompatible ({len(self.problems)} problem"
                         f"{'s' if len(self.problems) > 1 else ''}): {numbered}")


def dictionary_problems(drafter_dict, verifier_dict) -> List[str]:
    """Identical symbol lists (same words at the same indices) and special indices."""
    problems = []
    for name in SPECIAL_SYMBOLS:
        d_index, v_index = getattr(drafter_dict, name)(), getattr(verifier_dict, name)()
        if d_index != v_index:
            problems.append(f"{name} index differs: drafter {d_index}, verifier {v_index}")
    d_symbols, v_symbols = list(drafter_dict.symbols), list(verifier_dict.symbols)
    if len(d_symbols) != len(v_symbols):
        problems.append(f"dictionary sizes differ: drafter {len(d_symbols)}, verifier {len(v_symbols)}")
    mismatch = next((i for i, (a, b) in enumerate(zip(d_symbols, v_symbols)) if a != b), None)
    if mismatch is not None:
        n_diff = sum(a != b for a, b in zip(d_symbols, v_symbols))
        problems.append(f"dictionaries differ at {n_diff} indices, first at {mismatch}: "
                        f"drafter {d_symbols[mismatch]!r}, verifier {v_symbols[mismatch]!r}")
    return problems


def output_size(model) -> Optional[int]:
    """Vocabulary size of a fairseq encoder-decoder's target embeddings (None if unknown)."""
    embed = getattr(getattr(model, "decoder", None), "embed_tokens", None)
    return getattr(embed, "num_embeddings", None)


def model_problems(drafter, verifier, drafter_dict, verifier_dict) -> List[str]:
    problems = []
    for role, model, dictionary in (("drafter", drafter, drafter_dict), ("verifier", verifier, verifier_dict)):
        size = output_size(model)
        if size is not None and size != len(dictionary):
            problems.append(f"the {role} has {size} target embeddings but its dictionary {len(dictionary)} symbols")
    if not callable(getattr(drafter, "propose", None)) or getattr(drafter, "block_size", None) is None:
        problems.append(f"the drafter ({type(drafter).__name__}) is no block drafter (no propose()/block_size)")
    if callable(getattr(verifier, "propose", None)):
        problems.append(f"the verifier ({type(verifier).__name__}) is a block drafter, not an autoregressive model")
    elif not hasattr(getattr(verifier, "decoder", None), "reorder_incremental_state"):
        problems.append(f"the verifier ({type(verifier).__name__}) has no incremental decoder")
    return problems


def position_problems(drafter, verifier) -> List[str]:
    """The drafter must take every source and target length the verifier takes."""
    d_src, d_tgt = drafter.max_positions()
    v_src, v_tgt = verifier.max_positions()
    problems = []
    if d_src < v_src:
        problems.append(f"the drafter reads sources of up to {d_src} tokens, the verifier {v_src}")
    if d_tgt < v_tgt:
        problems.append(f"the drafter has {d_tgt} target positions, fewer than the verifier's {v_tgt}")
    return problems


def block_size_problems(drafter, block_size: Optional[int]) -> List[str]:
    """Decoding may ask for k <= the trained block size (``propose`` returns the first k)."""
    trained = getattr(drafter, "block_size", None)
    if block_size is None or trained is None or block_size <= trained:
        return []
    return [f"decoding asks for blocks of {block_size} tokens but the drafter was trained with "
            f"block size {trained} (use --block-size <= {trained} or another drafter)"]


def encoder_problems(drafter, verifier) -> List[str]:
    """A drafter trained on a verifier's (frozen) encoder reads that verifier's encoder
    output at decode time: it must be the same encoder (weights fingerprint)."""
    args = getattr(drafter, "args", None)
    expected = getattr(args, "verifier_encoder_fingerprint", None)
    if not getattr(args, "share_verifier_encoder", False) or expected is None:
        return []
    from fairseq_plugins.models.drafter_init import encoder_fingerprint

    found = encoder_fingerprint(verifier.encoder)
    if found != expected:
        return [f"the drafter shares the encoder of the verifier it was trained with (fingerprint {expected}); "
                f"this verifier's encoder differs ({found})"]
    return []


def check_compatibility(drafter, verifier, drafter_dict, verifier_dict, block_size: Optional[int] = None):
    """Raise :class:`IncompatibleModelsError` listing every mismatch, or return None.

    Checks: identical dictionaries (symbols and bos/pad/eos/unk indices), model
    embeddings sized to their dictionary, a drafter with ``propose``/``block_size`` and a
    verifier with an incremental decoder, max positions (drafter >= verifier on source
    and target), the block size asked for against the one the drafter was trained with, and
    for a drafter that shares its verifier's encoder, that encoder (weights fingerprint).
    """
    problems = dictionary_problems(drafter_dict, verifier_dict)
    problems += model_problems(drafter, verifier, drafter_dict, verifier_dict)
    try:
        problems += position_problems(drafter, verifier)
    except (AttributeError, TypeError, ValueError) as error:
        problems.append(f"cannot compare max positions: {error}")
    problems += block_size_problems(drafter, block_size)
    problems += encoder_problems(drafter, verifier)
    if problems:
        raise IncompatibleModelsError(problems)
