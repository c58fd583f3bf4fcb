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


def test_the_recipe_averages_the_epochs_a_setting_keeps(tmp_path):
    """recipes/average-checkpoints.sh with a setting that keeps 5 epochs averages those 5 (not its old fixed 10)."""
    import os
    import subprocess

    from conftest import REPO

    weights = [torch.full((2,), float(epoch)) for epoch in range(1, 8)]  # epochs 1-7; the last 5: 3..7, mean 5
    for epoch, value in enumerate(weights, start=1):
        torch.save({"model": {"w": value}, "cfg": {}}, tmp_path / f"checkpoint{epoch}.pt")
    env = {**os.environ, "SETTING": "multi30k-verifier", "SAVE_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    proc = subprocess.run(["bash", str(REPO / "recipes" / "average-checkpoints.sh")], env=env, text=True,
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    averaged = torch.load(tmp_path / "checkpoint_avg5.pt", weights_only=False)["model"]["w"]
    assert torch.equal(averaged, torch.full((2,), 5.0))
