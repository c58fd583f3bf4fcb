"""The Python API: load once, translate a list of strings."""
import pytest

from fairseq_plugins import inference
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



def test_statistics_count_every_sentence_at_batch_1(reverse_data, tiny_checkpoint):
    translator = Translator.load(str(tiny_checkpoint), str(reverse_data), decoding="iad", max_len_b=30)
    translator.translate(SENTENCES)
    assert translator.generator.stats.summary()["sentences"] == 3  # ids 0, 1, 2: not every batch's id 0
    translator.translate(SENTENCES)
    assert translator.generator.stats.summary()["sentences"] == 3  # the same sentences again replace their records


def test_batches_are_sorted_by_length_and_results_come_back_in_input_order(reverse_data, tiny_checkpoint,
                                                                             monkeypatch):
    sentences = ["w1 w2 w3 w4 w5", "w7", "w3 w9 w10", "w2 w2", "w5 w6 w7 w8 w9 w10 w11", "w4"]
    translator = Translator.load(str(tiny_checkpoint), str(reverse_data), decoding="iad", max_len_b=30)
    alone = translator.translate(sentences)
    seen = []  # (source lengths, ids) of each batch
    decode = inference.best_hypotheses

    def spy(task, generator, models, tokens, ids=None):
        seen.append(([len(t) for t in tokens], list(ids)))
        return decode(task, generator, models, tokens, ids=ids)

    monkeypatch.setattr(inference, "best_hypotheses", spy)
    assert translator.translate(sentences, batch_size=2) == alone
    lengths = [batch for batch, _ in seen]
    assert lengths == [[2, 2], [3, 4], [6, 8]]  # "w7", "w4" | "w2 w2", "w3 w9 w10" | the two longest, with eos
    assert [ids for _, ids in seen] == [[1, 5], [3, 2], [0, 4]]
    assert translator.generator.stats.summary()["sentences"] == 6  # every sentence under its own id


def test_length_sorted_batches_keep_both_limits():
    lengths = [5, 1, 3, 2, 4, 3]
    assert list(inference.length_sorted_batches(lengths, 2)) == [[1, 3], [2, 5], [4, 0]]  # ties in input order
    assert list(inference.length_sorted_batches(lengths, 1)) == [[1], [3], [2], [5], [4], [0]]
    assert list(inference.length_sorted_batches(lengths, 6, max_tokens=9)) == [[1, 3, 2], [5, 4], [0]]  # 4 x 3 > 9
    with pytest.raises(PluginError, match="batch_size must be >= 1, got 0"):
        list(inference.length_sorted_batches(lengths, 0))


def test_translate_rejects_a_bare_string(reverse_data, tiny_checkpoint):
    translator = Translator.load(str(tiny_checkpoint), str(reverse_data), decoding="iad")
    with pytest.raises(PluginError, match="list of sentences"):
        translator.translate("w1 w2")


def test_unknown_decoding_is_a_clear_error(reverse_data, tiny_checkpoint):
    with pytest.raises(PluginError, match="unknown decoding 'fastest'; choose from beam, "):
        Translator.load(str(tiny_checkpoint), str(reverse_data), decoding="fastest")


@pytest.mark.parametrize("decoding", ["beam", "iad", "hybrid-jacobi"])
def test_over_long_sentence_is_refused_with_every_decoding(reverse_data, tiny_checkpoint, decoding):
    translator = Translator.load(str(tiny_checkpoint), str(reverse_data), decoding=decoding, max_len_b=30)
    too_long = " ".join(["w1"] * 1100)
    with pytest.raises(PluginError, match=r"sentence 1 \('w1 w1 .*\.\.\.'\) has 1101 tokens, more than the 1024 "
                                          r"source tokens the model takes"):
        translator.translate(["w1 w2", too_long, "w3"])
    assert len(translator.translate(["w1 w2", " ".join(["w1"] * 1023)])) == 2  # 1024 tokens with eos: fine


def test_api_and_distillation_share_one_inference_path(reverse_data, tiny_checkpoint):
    """The same beam search through the API and through distill's teacher: same outputs."""
    from fairseq_plugins.scripts import distill

    sentences = SENTENCES + ["w5 w6 w7 w8", "w2"]
    teacher = distill.Translator([str(tiny_checkpoint)], distill.get_parser().parse_args(
        ["--teacher", "t", "--input", "i", "--output", "o", "--device", "cpu", "--beam", "5", "--max-len-a", "0",
         "--max-len-b", "30", "--batch-size", "3"]))
    api = Translator.load(str(tiny_checkpoint), str(reverse_data), decoding="beam", beam=5, max_len_b=30)
    assert teacher.translate(sentences) == api.translate(sentences, batch_size=2)
    assert teacher.max_source_len == 1024


@pytest.mark.parametrize("missing", ["verifier", "sentencepiece_model", "data"])
def test_missing_files_are_named_in_one_line(reverse_data, tiny_checkpoint, tmp_path, missing):
    paths = {"verifier": str(tiny_checkpoint), "sentencepiece_model": None, "data": str(reverse_data),
             missing: str(tmp_path / "absent")}
    with pytest.raises(PluginError, match=f"not found: {tmp_path / 'absent'}"):
        Translator.load(paths["verifier"], paths["data"], decoding="iad", sentencepiece_model=paths["sentencepiece_model"])


def test_unreadable_sentencepiece_model_is_named_in_one_line(reverse_data, tiny_checkpoint, tmp_path):
    broken = tmp_path / "broken.model"
    broken.write_text("not a sentencepiece model\n")
    with pytest.raises(PluginError, match=f"sentencepiece model {broken} is not readable") as error:
        Translator.load(str(tiny_checkpoint), str(reverse_data), decoding="iad", sentencepiece_model=str(broken))
    assert "\n" not in str(error.value)

