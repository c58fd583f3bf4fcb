"""SpecDec end to end: a drafter trained with stock fairseq-train, then fairseq-generate
and fairseq-interactive --decoding specdec == --beam 1, token for token; bad input."""
import re

import pytest

from conftest import PLUGIN_DIR, preprocess, run_cli, train, train_drafter, write_reverse_corpus
from test_cli_end_to_end import hypotheses

PLUGIN = ["--user-dir", PLUGIN_DIR, "--task", "speculative_translation"]


def tokens_only(output):
    return {i: h for i, h in hypotheses(output).items()}


@pytest.mark.slow
@pytest.mark.parametrize("batch_size", [1, 5])
def test_specdec_equals_greedy_through_fairseq_generate(reverse_data, tiny_checkpoint, drafter, stock_greedy,
                                                        batch_size):
    common = ["--path", tiny_checkpoint, "--gen-subset", "test", "--batch-size", batch_size, "--max-len-b", 30]
    greedy = stock_greedy(batch_size)
    specdec = run_cli("fairseq-generate", reverse_data, *PLUGIN, *common, "--drafter-path", drafter,
                      "--decoding", "specdec", "--print-step")
    assert tokens_only(specdec.stdout) == tokens_only(greedy) and len(tokens_only(greedy)) == 24
    assert re.search(r"specdec: 24 sentences, [\d.]+ iterations/sentence, [\d.]+ tokens/iteration", specdec.stderr)
    assert "beam=1" in specdec.stdout  # the BLEU line does not claim beam=5


@pytest.mark.slow
@pytest.mark.parametrize("batch_size", [1, 5])
def test_cuda_graph_steps_equal_greedy_through_fairseq_generate(reverse_data, tiny_checkpoint, shared_drafter,
                                                                stock_greedy, batch_size):
    """``--cuda-graphs on`` on a CPU runs the graphs' static steps eagerly: batch 1 on them, batch 5 (and its last
    batch of 4) on the ordinary caches; either way --beam 1's output."""
    common = ["--path", tiny_checkpoint, "--gen-subset", "test", "--batch-size", batch_size, "--max-len-b", 30]
    greedy = stock_greedy(batch_size)
    specdec = run_cli("fairseq-generate", reverse_data, *PLUGIN, *common, "--drafter-path", shared_drafter,
                      "--decoding", "specdec", "--cuda-graphs", "on")
    assert tokens_only(specdec.stdout) == tokens_only(greedy) and len(tokens_only(greedy)) == 24
    assert "--cuda-graphs on, on a CPU: the static steps run eagerly" in specdec.stderr


@pytest.mark.slow
@pytest.mark.parametrize("drafter_fixture, batch_sizes", [("drafter", (1, 5)), ("shared_drafter", (5,))])
def test_fp16_exported_pair_equals_greedy(reverse_data, tiny_checkpoint, drafter_fixture, batch_sizes, request,
                                          tmp_path):
    """A pair exported with ``export_checkpoint --fp16`` (weights that are float16 numbers, loaded
    as float32): the defaults store them as float16 in the verifier's and the drafter's products
    (linears.HalfWeightLinears), and the output is still ``--beam 1``'s on that checkpoint. The export
    blanks the drafter's --init-from-verifier path: a drafter sharing the verifier's encoder still loads."""
    from fairseq_plugins.scripts.export_checkpoint import export

    verifier, small_drafter = tmp_path / "verifier.pt", tmp_path / "drafter.pt"
    export(tiny_checkpoint, verifier, fp16=True)
    export(request.getfixturevalue(drafter_fixture), small_drafter, fp16=True)
    for batch_size in batch_sizes:
        common = ["--path", verifier, "--gen-subset", "test", "--batch-size", batch_size, "--max-len-b", 30]
        greedy = run_cli("fairseq-generate", reverse_data, *common, "--beam", 1).stdout
        specdec = run_cli("fairseq-generate", reverse_data, *PLUGIN, *common, "--drafter-path", small_drafter,
                          "--decoding", "specdec")
        assert tokens_only(specdec.stdout) == tokens_only(greedy) and len(tokens_only(greedy)) == 24
        assert "the verifier's weights are float16 numbers" in specdec.stderr
        assert re.search(r"the drafter's (matrix )?products .*(read its weights|weights under \d+ elements) stored "
                         r"as float16", specdec.stderr)  # fp16, or int8 whose small weights are all of these


@pytest.mark.slow
def test_specdec_plus_plus_and_drafter_only_run(reverse_data, tiny_checkpoint, drafter):
    common = ["--path", tiny_checkpoint, "--gen-subset", "test", "--max-len-b", 30, "--drafter-path", drafter]
    for extra in (["--decoding", "specdec++"], ["--decoding", "specdec++", "--beta", 5, "--tau", 3.0],
                  ["--decoding", "drafter-only"]):
        out = run_cli("fairseq-generate", reverse_data, *PLUGIN, *common, *extra).stdout
        assert len(hypotheses(out)) == 24 and "BLEU4 =" in out


def test_specdec_interactive_with_empty_line(reverse_data, tiny_checkpoint, drafter, stock_interactive_greedy):
    lines, greedy = stock_interactive_greedy
    args = [reverse_data, "--path", tiny_checkpoint, "--source-lang", "src", "--target-lang", "tgt", "--beam", 1]
    ours = run_cli("fairseq-interactive", *args, *PLUGIN, "--decoding", "specdec", "--drafter-path", drafter, input=lines).stdout
    assert hypotheses(ours) == hypotheses(greedy) and len(hypotheses(ours)) == 3


@pytest.mark.slow
@pytest.mark.parametrize("extra,message", [
    (["--beta", 0], "--beta must be >= 1"),
    (["--tau", -1], "--tau must be >= 0"),
    (["--decoding", "specdec++", "--beta", 1000], "--beta must be at most the vocabulary size"),
    (["--draft-vocab-size", 2], "--draft-vocab-size 2 leaves the drafter no token to propose"),
    (["--block-size", 9], "block size"),
    (["--fp16", "--cpu"], "fp16 decoding needs a CUDA device"),  # --cpu: also where a GPU is visible
    (["--cuda-graphs", "on"], "--cuda-graphs on: the drafter runs its own encoder (trained without "
                              "--share-verifier-encoder)"),
    (["--cuda-graphs", "sometimes"], "invalid choice: 'sometimes'"),
    (["--retain-dropout"], "--decoding specdec does not support: --retain-dropout"),
])
def test_bad_options_are_one_line_errors(reverse_data, tiny_checkpoint, drafter, extra, message):
    proc = run_cli("fairseq-generate", reverse_data, *PLUGIN, "--path", tiny_checkpoint, "--drafter-path", drafter,
                   "--decoding", "specdec", "--gen-subset", "test", *extra, check=False)
    assert proc.returncode != 0, proc.stdout[-500:]
    assert message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-3000:]


@pytest.fixture(scope="module")
def other_drafter(tmp_path_factory):
    """A drafter (and its verifier) trained on a corpus with another dictionary (30 words, not 24)."""
    root = tmp_path_factory.mktemp("other_dictionary")
    other = preprocess(write_reverse_corpus(root / "raw", vocab=30, seed=5), root / "bin")
    return train_drafter(other, train(other, root / "v", max_update=5), root / "d", max_update=5)


@pytest.mark.slow
def test_drafter_with_another_dictionary_is_rejected(reverse_data, tiny_checkpoint, other_drafter):
    proc = run_cli("fairseq-generate", reverse_data, *PLUGIN, "--path", tiny_checkpoint, "--drafter-path", other_drafter,
                   "--decoding", "specdec", "--gen-subset", "test", check=False)
    assert proc.returncode != 0
    sizes = re.search(r"dictionary sizes differ: drafter (\d+), verifier (\d+)", proc.stderr)
    assert "error: drafter and verifier are incompatible" in proc.stderr, proc.stderr[-3000:]
    assert sizes and int(sizes[1]) > int(sizes[2]), proc.stderr[-3000:]  # its corpus has the more words
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_input_longer_than_max_positions(reverse_data, tiny_checkpoint, drafter):
    long_line = " ".join(["w1"] * 40) + "\n"
    proc = run_cli("fairseq-interactive", reverse_data, *PLUGIN, "--path", tiny_checkpoint, "--drafter-path", drafter,
                   "--decoding", "specdec", "--source-lang", "src", "--target-lang", "tgt",
                   "--max-source-positions", 20, input=long_line, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "line 1 skipped: 41 tokens, more than the 20 source tokens the model takes" in proc.stderr
    assert "Traceback" not in proc.stderr


def moved_checkpoint(checkpoint, tmp_path, name, **task):
    """A copy of ``checkpoint`` whose saved data folder does not exist (trained on another machine), its task's
    settings changed by ``task``."""
    import torch

    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    state["cfg"]["task"]["data"] = str(tmp_path / "gone" / "data-bin")
    state["cfg"]["task"].update(task)
    torch.save(state, tmp_path / name)
    return tmp_path / name


@pytest.mark.slow
def test_drafter_trained_elsewhere_uses_the_verifiers_dictionaries(reverse_data, tiny_checkpoint, drafter, stock_greedy,
                                                                   tmp_path):
    moved = moved_checkpoint(drafter, tmp_path, "moved_drafter.pt")
    common = ["--path", tiny_checkpoint, "--gen-subset", "test", "--batch-size", 5, "--max-len-b", 30]
    greedy = stock_greedy(5)
    specdec = run_cli("fairseq-generate", reverse_data, *PLUGIN, *common, "--drafter-path", moved, "--decoding", "specdec")
    assert tokens_only(specdec.stdout) == tokens_only(greedy) and len(tokens_only(greedy)) == 24


@pytest.mark.slow
def test_drafter_trained_elsewhere_with_another_dictionary_is_a_one_line_error(reverse_data, tiny_checkpoint,
                                                                                 other_drafter, tmp_path):
    moved = moved_checkpoint(other_drafter, tmp_path, "moved_other.pt")
    proc = run_cli("fairseq-generate", reverse_data, *PLUGIN, "--path", tiny_checkpoint, "--drafter-path", moved,
                   "--decoding", "specdec", "--gen-subset", "test", check=False)
    assert proc.returncode != 0
    assert "does not fit the verifier's dictionaries" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-3000:]


@pytest.mark.slow
def test_drafter_of_other_languages_is_a_one_line_error(reverse_data, tiny_checkpoint, drafter, tmp_path):
    moved = moved_checkpoint(drafter, tmp_path, "moved_xx.pt", source_lang="xx", target_lang="yy")
    proc = run_cli("fairseq-generate", reverse_data, *PLUGIN, "--path", tiny_checkpoint, "--drafter-path", moved,
                   "--decoding", "specdec", "--gen-subset", "test", check=False)
    assert proc.returncode != 0
    assert "was trained on other languages" in proc.stderr and "no dict.xx.txt" in proc.stderr, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr


def alignments(output):
    """{sentence id: its A- line's text} from fairseq-generate's output."""
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^A-(\d+)\t(.*)$", output, re.M)}


def soft_rows(text):
    """A soft alignment line -> its source probabilities, one row per output token, as one flat list, and the
    rows' lengths."""
    rows = [[float(p) for p in row.split(",")] for row in text.split()]
    return [p for row in rows for p in row], [len(row) for row in rows]


@pytest.mark.slow
@pytest.mark.parametrize("kind, decoding, batch_size", [("hard", "specdec", 5), ("soft", "iad", 1)])
def test_print_alignment_equals_stock_greedys(reverse_data, tiny_checkpoint, drafter, kind, decoding, batch_size):
    """--print-alignment with a plugin decoder: stock greedy's alignments (hard: the same pairs; soft: the same
    probabilities up to rounding), from a teacher-forced pass of the verifier over the finished outputs."""
    common = ["--path", tiny_checkpoint, "--gen-subset", "test", "--batch-size", batch_size, "--max-len-b", 30,
              "--print-alignment", kind]
    stock = run_cli("fairseq-generate", reverse_data, *common, "--beam", 1).stdout
    drafting = ["--drafter-path", drafter] if decoding == "specdec" else []
    ours = run_cli("fairseq-generate", reverse_data, *PLUGIN, *common, "--decoding", decoding, *drafting).stdout
    assert tokens_only(ours) == tokens_only(stock) and len(alignments(stock)) == 24
    if kind == "hard":
        assert alignments(ours) == alignments(stock) and all(alignments(stock).values())
    else:
        for i, text in alignments(stock).items():
            (mine, my_shape), (theirs, shape) = soft_rows(alignments(ours)[i]), soft_rows(text)
            assert my_shape == shape and mine == pytest.approx(theirs, abs=2e-6)


@pytest.mark.slow
def test_score_reference_scores_the_references(reverse_data, tiny_checkpoint):
    """--score-reference replaces the search with fairseq's scorer, whatever --decoding says (as it does --beam)."""
    common = ["--path", tiny_checkpoint, "--gen-subset", "test", "--score-reference"]
    stock = run_cli("fairseq-generate", reverse_data, *common).stdout
    ours = run_cli("fairseq-generate", reverse_data, *PLUGIN, *common, "--decoding", "greedy")
    assert re.findall(r"^[HP]-.*$", ours.stdout, re.M) == re.findall(r"^[HP]-.*$", stock, re.M)
    assert len(hypotheses(stock)) == 24 and "--decoding greedy is not used" in ours.stderr
