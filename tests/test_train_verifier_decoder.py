"""tools/train_verifier_decoder.py: the verifier's decoder learns, its encoder and the embeddings the encoder shares
with the decoder stay as they were (so a drafter that fingerprints that encoder still fits), and every file it saves
loads as the verifier did."""
import torch

from drafter_helpers import load_verifier
from fairseq_plugins.models.drafter_init import encoder_fingerprint
from tools import train_verifier_decoder


def test_only_the_decoder_learns(reverse_data, tiny_checkpoint, tmp_path):
    out = tmp_path / "student.pt"
    train_verifier_decoder.main([str(reverse_data), str(out), "--verifier", str(tiny_checkpoint), "--lr", "1e-3",
                                 "--save-every", "1", "--log-every", "1000"])
    before = torch.load(tiny_checkpoint, map_location="cpu", weights_only=False)["model"]
    after = torch.load(out, map_location="cpu", weights_only=False)["model"]
    assert before.keys() == after.keys()
    shared = [name for name in before if (name.startswith("encoder.") or "embed_tokens" in name)
              and not name.endswith("_float_tensor")]  # a placeholder, never written
    assert shared and all(torch.equal(before[name], after[name]) for name in shared)
    layers = [name for name in before if name.startswith("decoder.layers.") and torch.is_floating_point(before[name])]
    assert any(not torch.equal(before[name], after[name]) for name in layers)

    teacher, _ = load_verifier(tiny_checkpoint)
    snapshots = sorted(tmp_path.glob("student-u*.pt"))
    assert [path.name for path in snapshots[:2]] == ["student-u1.pt", "student-u2.pt"]
    for path in (out, *snapshots):
        student, _ = load_verifier(path)
        assert encoder_fingerprint(student.encoder) == encoder_fingerprint(teacher.encoder)
