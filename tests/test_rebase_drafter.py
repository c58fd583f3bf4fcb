"""tools/rebase_drafter.py: a shared-encoder drafter carried over to a verifier trained on (its encoder
changed) keeps its decoder, takes the new encoder and its fingerprint, and so fits the new verifier, not the old."""
import copy

import pytest
import torch

from drafter_helpers import DictTask, drafter_args, load_verifier
from fairseq_plugins.decoding.compatibility import encoder_problems
from fairseq_plugins.models.block_drafter import BlockDrafterModel
from fairseq_plugins.models.drafter_init import encoder_fingerprint
from tools import rebase_drafter


@pytest.fixture(scope="module")
def old_pair(tiny_checkpoint, tmp_path_factory):
    """(verifier, dictionary, drafter checkpoint path): a drafter sharing the tiny verifier's encoder."""
    verifier, dictionary = load_verifier(tiny_checkpoint)
    args = drafter_args(init_from_verifier=str(tiny_checkpoint), share_verifier_encoder=True)
    torch.manual_seed(0)
    drafter = BlockDrafterModel.build_model(args, DictTask(dictionary))
    path = tmp_path_factory.mktemp("drafter") / "drafter.pt"
    torch.save({"cfg": {"model": args}, "args": None, "model": drafter.state_dict()}, path)
    return verifier, dictionary, path


def trained_on(checkpoint, out, seed=1):
    """A copy of a verifier checkpoint whose encoder layers moved (as further training moves them; the embeddings,
    tied to the decoder's, are left alone so the copy stays consistent)."""
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    g = torch.Generator().manual_seed(seed)
    for name, tensor in state["model"].items():
        if name.startswith("encoder.layers.") and torch.is_floating_point(tensor):
            state["model"][name] = tensor + 0.01 * torch.randn(tensor.shape, generator=g, dtype=tensor.dtype)
    torch.save(state, out)
    return out


def rebuilt(path, dictionary):
    """The drafter a decoder would load from ``path``: built from its saved options, then its weights."""
    state = torch.load(path, map_location="cpu", weights_only=False)
    args = copy.deepcopy(state["cfg"]["model"])
    args.init_from_verifier = "/nonexistent/verifier.pt"  # built from its own weights, as at decode time
    model = BlockDrafterModel.build_model(args, DictTask(dictionary))
    model.load_state_dict(state["model"])
    model.args = args
    return model


def test_the_rebased_drafter_fits_the_new_verifier_only(old_pair, tiny_checkpoint, tmp_path):
    old_verifier, dictionary, drafter_path = old_pair
    new_verifier, _ = load_verifier(trained_on(tiny_checkpoint, tmp_path / "verifier2.pt"))
    old_drafter = rebuilt(drafter_path, dictionary)
    assert encoder_problems(old_drafter, old_verifier) == []
    assert encoder_problems(old_drafter, new_verifier)  # refused: the encoder changed

    rebase_drafter.main(str(drafter_path), str(tmp_path / "verifier2.pt"), str(tmp_path / "rebased.pt"))
    rebased = rebuilt(tmp_path / "rebased.pt", dictionary)
    assert rebased.args.verifier_encoder_fingerprint == encoder_fingerprint(new_verifier.encoder)
    assert encoder_fingerprint(rebased.encoder) == encoder_fingerprint(new_verifier.encoder)
    assert encoder_problems(rebased, new_verifier) == []
    assert encoder_problems(rebased, old_verifier)
    old_decoder, new_decoder = old_drafter.decoder.state_dict(), rebased.decoder.state_dict()
    weights = [name for name in old_decoder if not name.endswith("_float_tensor")]  # a placeholder, never written
    assert weights and all(torch.equal(old_decoder[name], new_decoder[name]) for name in weights)


def test_a_verifier_of_another_shape_is_refused(old_pair, tmp_path):
    _, _, drafter_path = old_pair
    state = torch.load(drafter_path, map_location="cpu", weights_only=False)
    state["model"] = {name: tensor for name, tensor in state["model"].items() if "layers.1." not in name}
    torch.save(state, tmp_path / "shallow.pt")
    with pytest.raises(SystemExit, match="not named as the drafter's"):
        rebase_drafter.main(str(drafter_path), str(tmp_path / "shallow.pt"), str(tmp_path / "out.pt"))
