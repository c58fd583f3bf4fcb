"""The shipped double-token pair (checkpoints/double-token): inference-only float16 files with no paths of the machine
that trained them, indexing the demo pair's dictionary, that fairseq-interactive decodes in their own target order;
the bidirectional model, whose output is restored from head+tail order, mostly agrees with the single-token one."""
import re

import pytest
import torch

from conftest import PLUGIN_DIR, REPO, run_cli
from fairseq_plugins_compat.checkpoint_loading import load_checkpoint_file

PAIR = REPO / "checkpoints" / "double-token"
DEMO = REPO / "checkpoints" / "demo"
pytestmark = pytest.mark.skipif(not (PAIR / "bidirectional.pt").exists(), reason="no shipped double-token pair")


def interactive(name, *extra, text="", check=True):
    """fairseq-interactive with the shipped ``name``.pt on ``text`` (the CompletedProcess)."""
    return run_cli("fairseq-interactive", DEMO, "--user-dir", PLUGIN_DIR, "--task", "double_token_translation",
                   "-s", "en", "-t", "de", "--bpe", "sentencepiece", "--sentencepiece-model",
                   DEMO / "sentencepiece.model", "--path", PAIR / f"{name}.pt", "--cpu", *extra, input=text,
                   check=check)


def translate(name, *extra):
    """``{sentence id: detokenized output}`` of fairseq-interactive on the demo sentences."""
    proc = interactive(name, *extra, text=(DEMO / "sentences.en").read_text())
    return {int(i): text for i, text in re.findall(r"^D-(\d+)\t\S+\t(.*)$", proc.stdout, flags=re.M)}


@pytest.mark.parametrize("name", ["single_l2r", "bidirectional"])
def test_shipped_file_is_small_float16_without_machine_paths(name):
    state = load_checkpoint_file(str(PAIR / f"{name}.pt"))
    assert state["cfg"]["task"]["target_order"] == name
    assert all(t.dtype == torch.float16 for t in state["model"].values() if t.is_floating_point())
    assert "last_optimizer_state" not in state and not state["extra_state"]  # inference only
    assert not re.search(r"/(work|tmp|home)/", str(state["cfg"])), name
    dictionary_size = sum(1 for _ in open(DEMO / "dict.de.txt", encoding="utf-8")) + 4  # + fairseq's specials
    assert state["model"]["decoder.embed_tokens.weight"].size(0) == dictionary_size


def test_both_decode_the_demo_sentences_in_their_order_and_mostly_agree():
    sentences = (DEMO / "sentences.en").read_text().splitlines()
    single = translate("single_l2r", "--target-order", "single_l2r")
    bidirectional = translate("bidirectional", "--beam", "1")
    assert sorted(single) == sorted(bidirectional) == list(range(len(sentences)))
    assert all(text.strip() for text in [*single.values(), *bidirectional.values()])
    agree = sum(single[i] == bidirectional[i] for i in single)
    assert agree >= len(sentences) // 2, (single, bidirectional)
    wrong_order = interactive("single_l2r", check=False)
    assert wrong_order.returncode != 0
    assert "trained with --target-order single_l2r, not bidirectional" in wrong_order.stderr.strip().splitlines()[-1]
