"""average_checkpoints: the mean of the weights, and weights that agree in every checkpoint (a verifier's frozen
encoder) come back bit for bit, so a drafter's encoder fingerprint still matches the averaged verifier."""
import torch

from fairseq_plugins.models.drafter_init import weights_fingerprint
from fairseq_plugins.scripts.average_checkpoints import average_checkpoints


def write_checkpoints(tmp_path, frozen, trained):
    paths = []
    for i, weights in enumerate(trained):
        path = tmp_path / f"checkpoint{i}.pt"
        torch.save({"model": {"encoder.weight": frozen.clone(), "decoder.weight": weights}, "cfg": {}}, path)
        paths.append(str(path))
    return paths


def test_frozen_weights_average_to_themselves_bit_for_bit(tmp_path):
    frozen = torch.tensor([-0.0, 0.0, 0.1, -1 / 3, 3.0e-8, -65504.0])
    trained = [torch.randn(6) for _ in range(3)]
    averaged = average_checkpoints(write_checkpoints(tmp_path, frozen, trained))["model"]
    encoder = averaged["encoder.weight"]
    assert torch.equal(encoder, frozen) and torch.equal(torch.signbit(encoder), torch.signbit(frozen))
    assert weights_fingerprint({"weight": encoder}) == weights_fingerprint({"weight": frozen})
    assert torch.allclose(averaged["decoder.weight"], torch.stack(trained).mean(0))
