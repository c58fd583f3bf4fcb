"""The Python API: load once, translate a list of strings."""
import pytest

from fairseq_plugins.api import Translator
from fairseq_plugins_compat.errors import PluginError

SENTENCES = ["w1 w2 w3", "w7", "w3 w3 w9 w10 w11 w12"]


@pytest.mark.parametrize("decoding", ["iad", "hybrid-jacobi"])
def test_translate_equals_greedy(reverse_data, tiny_checkpoint, decoding):
    greedy = Translator.load(str(tiny_checkpoint), str(reverse_data), decoding="beam", beam=1, max_len_b=30)
    fast = Translator.load(str(tiny_checkpoint), str(reverse_data), decoding=decoding, max_len_b=30)
    expected = greedy.translate(SENTENCES)
    assert fast.translate(SENTENCES) == expected
    assert fast.translate(SENTENCES, batch_size=3) == expected
    assert all(isinstance(t, str) for t in expected) and len(expected) == 3
    assert all(h["steps"] <= len(h["tokens"]) for h in fast.translate_tokens(SENTENCES))


def test_translate_rejects_a_bare_string(reverse_data, tiny_checkpoint):
    translator = Translator.load(str(tiny_checkpoint), str(reverse_data), decoding="iad")
    with pytest.raises(PluginError, match="list of sentences"):
        translator.translate("w1 w2")


def test_unknown_decoding_is_a_clear_error(reverse_data, tiny_checkpoint):
    with pytest.raises(PluginError, match="unknown decoding 'fastest'; choose from beam, "):
        Translator.load(str(tiny_checkpoint), str(reverse_data), decoding="fastest")
