"""Sequence-level distillation helper: order, line count, reporting, sharding, resumption."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, translation_task
from fairseq_plugins.scripts import distill
from fairseq_plugins_compat.errors import PluginError

N_LINES, EMPTY_AT, LONG_AT = 60, 20, 40  # 0-based positions of the special lines
CHUNK = ["--chunk-size", "2", "--max-source-len", "30"]


def distill_env():
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


def run_distill(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", distill.MODULE, *map(str, args)], env=distill_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"distill failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return proc


@pytest.fixture(scope="module")
def corpus(reverse_data, tmp_path_factory):
    """60 source/reference lines with an empty source at line 21 and a 41-token one at 41."""
    raw = reverse_data.parent / "raw"
    src = (raw / "train.src").read_text().splitlines()[: N_LINES - 2]
    ref = (raw / "train.tgt").read_text().splitlines()[: N_LINES - 2]
    src.insert(EMPTY_AT, "")
    ref.insert(EMPTY_AT, "w1 w2 reference-of-empty")
    src.insert(LONG_AT, " ".join(["w3"] * 40))
    ref.insert(LONG_AT, "reference-of-long")
    root = tmp_path_factory.mktemp("distill")
    (root / "in.txt").write_text("\n".join(src) + "\n")
    (root / "ref.txt").write_text("\n".join(ref) + "\n")
    return root


@pytest.fixture(scope="module")
def sharded_run(corpus, tiny_checkpoint):
    """An uninterrupted run with 2 worker processes."""
    out = corpus / "sharded.txt"
    proc = run_distill("--teacher", tiny_checkpoint, "--input", corpus / "in.txt", "--reference", corpus / "ref.txt",
                       "--output", out, "--num-shards", 2, *CHUNK)
    return out, proc.stderr


@pytest.mark.slow
def test_help():
    proc = run_distill("--help")
    assert "--num-shards" in proc.stdout and "--reference" in proc.stdout and "resume" in proc.stdout


@pytest.mark.slow
def test_output_has_every_line_in_input_order(corpus, sharded_run, tiny_checkpoint):
    out, stderr = sharded_run
    outputs = out.read_text().split("\n")[:-1]
    sources = (corpus / "in.txt").read_text().split("\n")[:-1]
    assert len(outputs) == N_LINES
    assert outputs[EMPTY_AT] == "w1 w2 reference-of-empty" and outputs[LONG_AT] == "reference-of-long"
    report = Path(f"{out}.report.tsv").read_text().splitlines()
    assert report == ["line\treason\taction", f"{EMPTY_AT + 1}\tempty_source\treference",
                      f"{LONG_AT + 1}\ttoo_long(41>30)\treference"]
    assert "1 empty_source, 1 too_long" in stderr
    assert not Path(f"{out}.work").exists()  # chunks removed after the merge
    # every other line is the teacher's translation of the source on the same line
    translator = distill.Translator([str(tiny_checkpoint)], distill.get_parser().parse_args(
        ["--teacher", "t", "--input", "i", "--output", "o", "--device", "cpu"]))
    lines = [i for i in range(N_LINES) if i not in (EMPTY_AT, LONG_AT)]
    alone = [translator.translate([sources[i]])[0] for i in lines]
    same = sum(outputs[i] == hyp for i, hyp in zip(lines, alone))
    assert same >= 0.95 * len(lines) and len(set(alone)) > len(lines) // 2


@pytest.mark.slow
def test_a_greedy_teacher_decodes_with_the_plugins_greedy_and_beam_ones_output(corpus, tiny_checkpoint, monkeypatch,
                                                                                capsys):
    """--beam 1 with one teacher: the plugin's greedy decoder, the translations of fairseq's beam search with beam 1
    (a small float32 model: no near-tie here); --beam 5, or a teacher it cannot run: fairseq's beam search."""
    from fairseq_plugins.decoding import builder
    from fairseq_plugins.decoding.core import SpeculativeGenerator

    def translator(*extra):
        return distill.Translator([str(tiny_checkpoint)], distill.get_parser().parse_args(
            ["--teacher", "t", "--input", "i", "--output", "o", "--device", "cpu", *extra]))

    sources = [line for line in (corpus / "in.txt").read_text().split("\n")[:N_LINES] if 0 < len(line.split()) <= 28]
    greedy = translator("--beam", "1")
    assert isinstance(greedy.generator, SpeculativeGenerator)
    stock = translator("--beam", "1")
    stock.generator = stock.task.build_generator(stock.models, distill.argparse.Namespace(
        beam=1, lenpen=1.0, max_len_a=1.2, max_len_b=10, decoding="beam"))
    assert not isinstance(stock.generator, SpeculativeGenerator)
    translations = greedy.translate(sources)
    assert translations == stock.translate(sources) and len(set(translations)) > len(sources) // 2
    assert not isinstance(translator("--beam", "5").generator, SpeculativeGenerator)

    def unsupported(decoder):
        raise PluginError("the verifier's decoder is not supported by speculative decoding: adaptive softmax")
    monkeypatch.setattr(builder, "check_supported_decoder", unsupported)
    assert not isinstance(translator("--beam", "1").generator, SpeculativeGenerator)
    assert "the teacher decodes with fairseq's beam search (the verifier's decoder is not supported" \
        in capsys.readouterr().err


def _chunks_done(work_dir):
    return len(list(work_dir.glob("chunk-*.txt"))) if work_dir.exists() else 0


@pytest.mark.slow
def test_kill_midway_then_resume_loses_and_duplicates_nothing(corpus, sharded_run, tiny_checkpoint):
    out, work = corpus / "resumed.txt", corpus / "resumed.txt.work"
    args = ["--teacher", tiny_checkpoint, "--input", corpus / "in.txt", "--reference", corpus / "ref.txt",
            "--output", out, *CHUNK]
    proc = subprocess.Popen([sys.executable, "-m", distill.MODULE, *map(str, args), "--num-shards", "1"],
                            env=distill_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 120
    while _chunks_done(work) < 3 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    n_chunks = N_LINES // 2
    done = _chunks_done(work)
    assert 3 <= done < n_chunks and not out.exists()
    resumed = run_distill(*args, "--num-shards", "2")  # resume with another shard count
    assert f"resuming: {done} of {n_chunks} chunks already done" in resumed.stderr
    assert out.read_text() == sharded_run[0].read_text()  # same lines, same order, same count


def test_other_settings_refuse_to_resume(tmp_path):
    (tmp_path / "in.txt").write_text("a b\nc\n")
    common = ["--teacher", "t.pt", "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "out.txt"), "--merge-only"]
    with pytest.raises(PluginError, match="0 of 1 chunks are not translated yet|1 of 1 chunks"):
        distill.main(common)
    with pytest.raises(PluginError, match=r"other settings \(chunk_size\)"):
        distill.main([*common, "--chunk-size", "1"])


def test_reference_with_another_line_count_is_refused(tmp_path):
    (tmp_path / "in.txt").write_text("a b\nc\n")
    (tmp_path / "ref.txt").write_text("x\n")
    with pytest.raises(PluginError, match="--reference has 1 lines, --input 2"):
        distill.main(["--teacher", "t.pt", "--input", str(tmp_path / "in.txt"), "--reference", str(tmp_path / "ref.txt"),
                      "--output", str(tmp_path / "o.txt")])


class FakeTranslator:
    def translate(self, lines):
        return ["" if line == "a" else line.upper() for line in lines]


def test_chunk_report_covers_empty_translations_and_fallbacks():
    lines, refs = ["a", "b c", "", "d e f"], ["ra", "rb", "rc", "rd"]
    outputs, report = distill.translate_chunk(FakeTranslator(), lines, refs, first_line=10, max_source_len=3)
    assert outputs == ["ra", "B C", "rc", "rd"]
    assert report == ["11\tempty_translation\treference", "13\tempty_source\treference", "14\ttoo_long(4>3)\treference"]
    outputs, report = distill.translate_chunk(FakeTranslator(), lines, None, first_line=0, max_source_len=3)
    assert outputs == ["", "B C", "", ""] and all(row.endswith("\tempty") for row in report)


def relative_data_teacher(tiny_checkpoint, path):
    """A copy of the teacher whose saved ``cfg.task.data`` is relative ('bin'), as when it was
    trained from another directory: the recipe must not depend on it."""
    import torch

    from fairseq_plugins_compat.checkpoint_loading import load_checkpoint_file

    state = load_checkpoint_file(str(tiny_checkpoint))
    state["cfg"]["task"]["data"] = "bin"
    torch.save(state, path)
    return path


def recipe_inputs(reverse_data, tmp_path):
    raw = reverse_data.parent / "raw"
    small = tmp_path / "raw"
    small.mkdir()
    for split, n in (("train", 30), ("valid", 5), ("test", 5)):
        for lang in ("src", "tgt"):
            (small / f"{split}.{lang}").write_text("\n".join((raw / f"{split}.{lang}").read_text().splitlines()[:n]) + "\n")
    return small


def run_recipe(env, cwd):
    return subprocess.run(["bash", str(REPO / "recipes" / "distill.sh")], env={**distill_env(), **env}, cwd=cwd,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)


@pytest.mark.slow
def test_recipe_distills_and_binarizes_with_the_verifier_dictionary(reverse_data, tiny_checkpoint, tmp_path):
    small = recipe_inputs(reverse_data, tmp_path)
    teacher = relative_data_teacher(tiny_checkpoint, tmp_path / "teacher.pt")
    elsewhere = tmp_path / "elsewhere"  # run from a directory without the teacher's saved 'bin'
    elsewhere.mkdir()
    env = {"TEACHER": str(teacher), "RAW": str(small), "SRC": "src", "TGT": "tgt", "DEVICE": "cpu",
           "VERIFIER_DATA": str(reverse_data), "OUT": str(tmp_path / "out"), "CHUNK_SIZE": "8", "PYTHON": sys.executable}
    proc = run_recipe(env, elsewhere)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "beam 1" in proc.stdout  # greedy by default
    bin_dir = tmp_path / "out" / "bin"
    assert (bin_dir / "dict.tgt.txt").read_text() == (reverse_data / "dict.tgt.txt").read_text()
    from fairseq.data import data_utils
    from fairseq.data.dictionary import Dictionary

    dataset = data_utils.load_indexed_dataset(str(bin_dir / "train.src-tgt.tgt"), Dictionary.load(str(bin_dir / "dict.tgt.txt")))
    assert len(dataset) == 30
    text = tmp_path / "out" / "text"
    assert len((text / "train.tgt").read_text().splitlines()) == 30
    # valid targets: the teacher's greedy translations; test: the references
    translator = distill.Translator([str(tiny_checkpoint)], distill.get_parser().parse_args(
        ["--teacher", "t", "--input", "i", "--output", "o", "--device", "cpu", "--beam", "1"]))
    valid_sources = (small / "valid.src").read_text().splitlines()
    assert (text / "valid.tgt").read_text().splitlines() == translator.translate(valid_sources)
    assert (text / "valid.tgt").read_text() != (small / "valid.tgt").read_text()
    assert (text / "test.tgt").read_text() == (small / "test.tgt").read_text()


@pytest.mark.slow
def test_recipe_missing_teacher_dictionary_is_one_line(reverse_data, tiny_checkpoint, tmp_path):
    small = recipe_inputs(reverse_data, tmp_path)
    env = {"TEACHER": str(tiny_checkpoint), "RAW": str(small), "SRC": "src", "TGT": "tgt", "DEVICE": "cpu",
           "VERIFIER_DATA": str(reverse_data), "TEACHER_DATA": str(tmp_path / "nowhere"),
           "OUT": str(tmp_path / "out"), "PYTHON": sys.executable}
    proc = run_recipe(env, tmp_path)
    assert proc.returncode != 0
    assert f"ERROR: missing {tmp_path / 'nowhere'}/dict.src.txt" in proc.stdout
    assert "Traceback" not in proc.stdout


@pytest.mark.slow
def test_recipe_more_sources_are_translated_and_binarized_as_train1(reverse_data, tiny_checkpoint, tmp_path):
    small = recipe_inputs(reverse_data, tmp_path)
    patterned = [f"w1 w{i} w2 w3" for i in range(4, 10)]  # one context, six words seen in it
    for lang in ("src", "tgt"):
        with open(small / f"train.{lang}", "a") as f:
            f.write("\n".join(patterned) + "\n")
    env = {"TEACHER": str(tiny_checkpoint), "RAW": str(small), "SRC": "src", "TGT": "tgt", "DEVICE": "cpu",
           "VERIFIER_DATA": str(reverse_data), "OUT": str(tmp_path / "out"), "CHUNK_SIZE": "8",
           "PYTHON": sys.executable, "MORE_SOURCES": "2", "MAX_LEN_A": "0", "MAX_LEN_B": "60"}
    proc = run_recipe(env, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    text, bin_dir = tmp_path / "out" / "text", tmp_path / "out" / "bin"
    more_sources = (text / "more-2.src").read_text().splitlines()
    assert len(more_sources) >= 4 and not set(more_sources) & set((small / "train.src").read_text().splitlines())
    translator = distill.Translator([str(tiny_checkpoint)], distill.get_parser().parse_args(
        ["--teacher", "t", "--input", "i", "--output", "o", "--device", "cpu", "--beam", "1",
         "--max-len-a", "0", "--max-len-b", "60"]))  # as the recipe below: not the batch's source length
    assert (text / "more-2.tgt").read_text().splitlines() == translator.translate(more_sources)
    task = translation_task(bin_dir)
    task.load_dataset("train", combine=True)
    assert len(task.datasets["train"]) == 36 + len(more_sources)
    assert not (bin_dir / "more").exists()

    bad = run_recipe({**env, "MORE_SOURCES": "two", "OUT": str(tmp_path / "bad")}, tmp_path)
    assert bad.returncode != 0 and "ERROR: MORE_SOURCES must be a number of passes" in bad.stdout
    assert "Traceback" not in bad.stdout


def test_cpu_shards_share_the_cores_unless_omp_num_threads_is_set(tmp_path, monkeypatch):
    started = []

    class FakePopen:
        def __init__(self, cmd, env, stdout, stderr):
            started.append(env)

    monkeypatch.setattr(distill.subprocess, "Popen", FakePopen)
    monkeypatch.setattr(distill.os, "cpu_count", lambda: 8)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    args = distill.get_parser().parse_args(["--teacher", "t.pt", "--input", "in", "--output", "out",
                                           "--device", "cpu", "--num-shards", "4"])
    args.work_dir = str(tmp_path)
    for _, _, log in distill.spawn_shards(args, []):
        log.close()
    assert [env["OMP_NUM_THREADS"] for env in started] == ["2"] * 4  # 8 cores shared out, not 8 threads each
    started.clear()
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    for _, _, log in distill.spawn_shards(args, []):
        log.close()
    assert [env["OMP_NUM_THREADS"] for env in started] == ["3"] * 4  # the user's setting is kept
