"""copy_layers: the warm start of a model with other numbers of layers (a 12+2 from a 6+6), each layer a copy of one
of the trained model's, that fairseq loads and fairseq-train fine-tunes."""
import pytest
import torch

from conftest import train
from fairseq_plugins.scripts import copy_layers
from fairseq_plugins_compat.checkpoint_loading import load_checkpoint_file
from fairseq_plugins_compat.errors import PluginError


def load_model(path, data):
    from fairseq import checkpoint_utils

    models, _, _ = checkpoint_utils.load_model_ensemble_and_task([str(path)], arg_overrides={"data": str(data)})
    return models[0].eval()


def layer(model, stack, i):
    return {name: weight for name, weight in getattr(model, stack).layers[i].named_parameters()}


def test_the_same_layers_give_the_same_model(tiny_checkpoint, reverse_data, tmp_path):
    out = tmp_path / "same.pt"
    copy_layers.main([str(tiny_checkpoint), str(out), "--encoder-layers", "2", "--decoder-layers", "2"])
    before, after = load_model(tiny_checkpoint, reverse_data), load_model(out, reverse_data)
    tokens = torch.tensor([[5, 6, 7, 8, 2]])
    with torch.no_grad():
        expected = before(tokens, torch.tensor([5]), tokens)[0]
        assert torch.equal(after(tokens, torch.tensor([5]), tokens)[0], expected)


def test_a_deeper_encoder_stacks_the_layers_and_a_shallower_decoder_keeps_its_last(tiny_checkpoint, reverse_data,
                                                                                    tmp_path):
    out = tmp_path / "4x1.pt"
    copy_layers.main([str(tiny_checkpoint), str(out), "--encoder-layers", "4", "--decoder-layers", "1"])
    before, after = load_model(tiny_checkpoint, reverse_data), load_model(out, reverse_data)
    assert (len(after.encoder.layers), len(after.decoder.layers)) == (4, 1)
    for new, old in ((0, 0), (1, 1), (2, 0), (3, 1)):
        copied, original = layer(after, "encoder", new), layer(before, "encoder", old)
        assert all(torch.equal(copied[name], original[name]) for name in original)
    copied, original = layer(after, "decoder", 0), layer(before, "decoder", 1)
    assert all(torch.equal(copied[name], original[name]) for name in original)
    assert torch.equal(after.encoder.embed_tokens.weight, before.encoder.embed_tokens.weight)
    # each copy is a tensor of its own: training one layer leaves its twin as it was
    with torch.no_grad():
        after.encoder.layers[2].fc1.weight.add_(1.0)
    assert torch.equal(after.encoder.layers[0].fc1.weight, before.encoder.layers[0].fc1.weight)
    state = load_checkpoint_file(str(out))
    assert (state["cfg"]["model"].encoder_layers, state["cfg"]["model"].decoder_layers) == (4, 1)
    assert "last_optimizer_state" not in state


def test_chosen_layers_and_a_fine_tune_from_the_warm_start(tiny_checkpoint, reverse_data, tmp_path):
    out = tmp_path / "3x1.pt"
    copy_layers.main([str(tiny_checkpoint), str(out), "--encoder-layers", "3", "--decoder-layers", "1",
                      "--encoder-from", "1,1,0", "--decoder-from", "0"])
    before, after = load_model(tiny_checkpoint, reverse_data), load_model(out, reverse_data)
    assert torch.equal(after.encoder.layers[2].fc2.weight, before.encoder.layers[0].fc2.weight)
    assert torch.equal(after.decoder.layers[0].fc2.weight, before.decoder.layers[0].fc2.weight)
    trained = train(reverse_data, tmp_path / "fine-tuned", max_update=3,
                    extra=("--encoder-layers", "3", "--decoder-layers", "1", "--finetune-from-model", str(out)))
    state = load_checkpoint_file(str(trained))
    assert state["optimizer_history"][-1]["num_updates"] == 3
    assert not torch.equal(state["model"]["encoder.layers.2.fc2.weight"].float(),
                           before.encoder.layers[0].fc2.weight)


@pytest.mark.parametrize("option, value, message", [
    ("--decoder-from", "0,1", "--decoder-from needs 1 layer numbers"),
    ("--encoder-from", "0,5,1", "between 0 and 1"),
    ("--encoder-from", "a,b,c", "comma-separated layer numbers"),
])
def test_a_wrong_layer_list_is_one_line(tiny_checkpoint, tmp_path, option, value, message):
    with pytest.raises(PluginError, match=message):
        copy_layers.main([str(tiny_checkpoint), str(tmp_path / "x.pt"), "--encoder-layers", "3",
                          "--decoder-layers", "1", option, value])
    assert not (tmp_path / "x.pt").exists()
