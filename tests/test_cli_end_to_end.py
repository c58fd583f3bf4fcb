"""The stock console scripts, run as subprocesses, with and without the plugin.

A fake ``torchaudio`` that raises OSError on import (as the CUDA build does on CPU-only
machines) is put first on PYTHONPATH: no translation path may import it.
"""
import re

import pytest

from conftest import PLUGIN_DIR, TINY_TRANSFORMER, TRAIN_FLAGS, run_cli, train


@pytest.fixture(scope="module")
def no_torchaudio(tmp_path_factory):
    root = tmp_path_factory.mktemp("fake_torchaudio")
    (root / "torchaudio").mkdir()
    (root / "torchaudio" / "__init__.py").write_text("raise OSError('torchaudio must not be imported')\n")
    import os

    return {"PYTHONPATH": os.pathsep.join([str(root), str(PLUGIN_DIR.parent)])}


def hypotheses(output):
    """{sentence id: hypothesis text} from fairseq-generate's H lines."""
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^H-(\d+)\t\S+\t(.*)$", output, re.M)}


def generate(data, checkpoint, *args, env=None):
    proc = run_cli("fairseq-generate", data, "--path", checkpoint, "--gen-subset", "test", "--max-len-b", 30, *args, env=env)
    return proc.stdout


@pytest.mark.slow
def test_train_generate_interactive_score(reverse_data, tiny_checkpoint, stock_greedy, tmp_path, no_torchaudio):
    # generate(... "--beam", 1, "--batch-size", 8) without the fake torchaudio, run once for the parity tests too;
    # beam 5 runs the same stock generator code under no_torchaudio
    beam1 = stock_greedy(8)
    beam5 = generate(reverse_data, tiny_checkpoint, "--beam", 5, "--batch-size", 8, env=no_torchaudio)
    assert len(hypotheses(beam1)) == len(hypotheses(beam5)) == 24
    assert "BLEU4 =" in beam5
    sys_file, ref_file = tmp_path / "sys.txt", tmp_path / "ref.txt"
    hyps = hypotheses(beam5)
    refs = {int(m.group(1)): m.group(2) for m in re.finditer(r"^T-(\d+)\t(.*)$", beam5, re.M)}
    sys_file.write_text("".join(hyps[i] + "\n" for i in sorted(hyps)))
    ref_file.write_text("".join(refs[i] + "\n" for i in sorted(refs)))
    assert re.search(r"BLEU4 = [\d.]+", run_cli("fairseq-score", "-s", sys_file, "-r", ref_file, env=no_torchaudio).stdout)
    assert re.search(r"BLEU = [\d.]+", run_cli("fairseq-score", "-s", sys_file, "-r", ref_file, "--sacrebleu").stdout)
    sentence_lines = run_cli("fairseq-score", "-s", sys_file, "-r", ref_file, "--sentence-bleu").stdout
    assert len(re.findall(r"^\d+ BLEU4 = ", sentence_lines, re.M)) == 24
    interactive = run_cli("fairseq-interactive", reverse_data, "--path", tiny_checkpoint, "--beam", 5,
                          "--source-lang", "src", "--target-lang", "tgt", input="w1 w2 w3\nw4\n", env=no_torchaudio).stdout
    assert len(re.findall(r"^H-\d+\t", interactive, re.M)) == 2


@pytest.mark.slow
def test_pre_norm_transformer_trains_and_generates(reverse_data, tmp_path, no_torchaudio):
    checkpoint = train(reverse_data, tmp_path / "prenorm", max_update=20,
                       extra=["--encoder-normalize-before", "--decoder-normalize-before"])
    assert len(hypotheses(generate(reverse_data, checkpoint, "--beam", 5, env=no_torchaudio))) == 24


@pytest.mark.slow
def test_eval_bleu_training_resume_and_average(reverse_data, tmp_path):
    save = tmp_path / "bleu"
    bleu_flags = ["--eval-bleu", "--eval-bleu-args", '{"beam": 1, "max_len_b": 20}',
                  "--best-checkpoint-metric", "bleu", "--maximize-best-checkpoint-metric"]
    train(reverse_data, save, max_update=20, extra=bleu_flags)
    resumed = run_cli("fairseq-train", reverse_data, *TINY_TRANSFORMER, *TRAIN_FLAGS, "--max-update", 40,
                      "--save-dir", save, *bleu_flags)
    assert "Loaded checkpoint" in resumed.stdout + resumed.stderr
    epochs = sorted(save.glob("checkpoint[0-9]*.pt"))
    assert len(epochs) >= 3
    averaged = tmp_path / "averaged.pt"
    run_cli("fairseq-average-checkpoints", "--inputs", save, "--num-epoch-checkpoints", 3, "--output", averaged)
    greedy = hypotheses(generate(reverse_data, averaged, "--beam", 1))
    assert len(greedy) == 24
    from fairseq_plugins.scripts.average_checkpoints import average_checkpoints
    from fairseq_plugins.scripts.export_checkpoint import export

    model = average_checkpoints([str(p) for p in epochs[-2:]])["model"]
    assert model["encoder.embed_tokens.weight"] is model["decoder.embed_tokens.weight"]  # tied stay tied
    exported = tmp_path / "exported.pt"
    export(str(averaged), str(exported))
    assert exported.stat().st_size < averaged.stat().st_size / 2  # no optimizer state
    assert hypotheses(generate(reverse_data, exported, "--beam", 1)) == greedy


@pytest.mark.slow
def test_distributed_training_with_two_cpu_processes(reverse_data, tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    from conftest import cli

    proc = run_cli("torchrun", "--nproc_per_node", 2, "--master_addr", "127.0.0.1", "--master_port", port,
                   cli("fairseq-train"), reverse_data, *TINY_TRANSFORMER, *TRAIN_FLAGS, "--max-update", 12,
                   "--save-dir", tmp_path / "ddp", "--distributed-world-size", 2, "--distributed-backend", "gloo")
    log = proc.stdout + proc.stderr
    assert "initialized host" in log and "rank 1" in log
    assert "num_updates 12" in log
    assert (tmp_path / "ddp" / "checkpoint_last.pt").exists()


def bad_checkpoint(kind, tmp_path, tiny_checkpoint, reverse_data):
    """A --path that is no usable checkpoint, and the error it must give."""
    import torch

    bad = tmp_path / "bad.pt"
    if kind == "text":
        bad.write_text("hello\n")
    elif kind == "truncated":
        bad.write_bytes(tiny_checkpoint.read_bytes()[:5000])
    elif kind == "tensor":
        torch.save(torch.zeros(3), bad)
    elif kind == "readme":
        return PLUGIN_DIR.parent / "README.md", "README.md is not a fairseq checkpoint (not a torch file)"
    elif kind == "dictionary":
        return reverse_data / "dict.src.txt", "dict.src.txt is not a fairseq checkpoint (not a torch file)"
    elif kind == "missing":
        return tmp_path / "nowhere.pt", f"checkpoint file {tmp_path / 'nowhere.pt'} does not exist"
    messages = {"text": "bad.pt is not a fairseq checkpoint (not a torch file)",
                "truncated": "truncated checkpoint", "tensor": "bad.pt is not a fairseq checkpoint"}
    return bad, messages[kind]


def assert_one_line_error(proc, prog, message):
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{prog}: error: ") and message in last, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "FAIRSEQ_PLUGINS_TRUST_CHECKPOINTS" not in proc.stderr


@pytest.mark.parametrize("path_kind", ["truncated", *(pytest.param(kind, marks=pytest.mark.slow)  # one in the edit loop
                                                   for kind in ("text", "tensor", "readme", "dictionary", "missing"))])
def test_bad_checkpoint_gives_one_line_error(reverse_data, tiny_checkpoint, tmp_path, path_kind):
    bad, message = bad_checkpoint(path_kind, tmp_path, tiny_checkpoint, reverse_data)
    proc = run_cli("fairseq-generate", reverse_data, "--path", bad, check=False)
    assert_one_line_error(proc, "fairseq-generate", message)
