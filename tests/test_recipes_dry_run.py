"""Recipes: the DRY_RUN chain (data -> train -> average -> generate -> evaluate) on a tiny
synthetic slice, CPU only and without network; the paper settings' batch arithmetic with a
stub fairseq-train; the repetition ratio and the compound splitting."""
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BIN_DIR, REPO

from fairseq_plugins.bench.repetition import count_repetitions, fairseq_hypotheses, repetition_ratio

RECIPES = REPO / "recipes"
EN_DE = {"the": "die", "a": "eine", "man": "Mann", "woman": "Frau", "dog": "Hund", "sees": "sieht",
         "big": "grosse", "small": "kleine", "house": "Haus", "car": "Auto", "red": "rote",
         "well-known": "bekannte", "state-of-the-art": "moderne", "and": "und", "runs": "laeuft"}


def recipe(script, env, timeout=300):
    """Run a recipe with bash; return stdout (raises with the log tail on failure)."""
    path = os.pathsep.join([str(BIN_DIR), os.environ.get("PATH", "")])
    full_env = {**os.environ, "PATH": path, "OMP_NUM_THREADS": "1", "WORKERS": "1", **env}
    proc = subprocess.run(["bash", str(RECIPES / script)], env=full_env, cwd=REPO, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    assert proc.returncode == 0, f"{script} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout, proc.stderr


def write_parallel(path_en, path_de, n, rng):
    words = list(EN_DE)
    with open(path_en, "w") as fe, open(path_de, "w") as fd:
        for _ in range(n):
            sent = [rng.choice(words) for _ in range(rng.randint(2, 9))]
            fe.write(" ".join(sent).capitalize() + ".\n")
            fd.write(" ".join(EN_DE[w] for w in sent).capitalize() + ".\n")


@pytest.fixture(scope="module")
def wmt_slice(tmp_path_factory):
    """Stand-in for the local WMT14 copy: newstest2013 (260 lines) and newstest2014 (50)."""
    root = tmp_path_factory.mktemp("wmt")
    rng = random.Random(0)
    write_parallel(root / "newstest2013.en", root / "newstest2013.de", 260, rng)
    write_parallel(root / "newstest2014.en", root / "newstest2014.de", 50, rng)
    return root


@pytest.mark.slow
def test_dry_run_chain(wmt_slice, tmp_path):
    out, ckpt = tmp_path / "wmt14", tmp_path / "ckpt"
    common = {"DRY_RUN": "1", "OUT_DIR": str(out), "SETTING": "wmt14-ende-verifier",
              "DATA": str(out / "bin"), "SAVE_DIR": str(ckpt)}
    recipe("data/prepare-wmt14-ende.sh", {**common, "WMT_DIR": str(wmt_slice), "DRY_BPE_OPS": "100"})
    assert (out / "bin" / "dict.en.txt").exists() and (out / "bin" / "test.en-de.de.bin").exists()
    assert sum(1 for _ in open(out / "raw" / "train.en")) == 200
    assert (out / "bpe" / "code").exists()

    trainings = {**common, "DRY_MAX_EPOCH": "2", "CPU": "1"}  # CPU=1 as DRY_RUN trains anyway: no probe for GPUs
    _, err = recipe("train-verifier.sh", trainings)
    assert "tokens/update" in err
    assert (ckpt / "checkpoint2.pt").exists() and (ckpt / "checkpoint_avg2.pt").exists()

    teacher = tmp_path / "teacher"  # the WMT14 teacher preset (Transformer-big), shrunk by DRY_RUN
    recipe("train-teacher.sh", {**trainings, "SETTING": "wmt14-ende-teacher", "SAVE_DIR": str(teacher)})
    assert (teacher / "checkpoint2.pt").exists() and (teacher / "checkpoint_avg2.pt").exists()

    stdout, err = recipe("generate.sh", {**common, "CHECKPOINT": str(ckpt / "checkpoint_avg2.pt")})
    gen = Path(stdout.strip().splitlines()[-1])
    assert gen.exists() and sum(line.startswith("H-") for line in open(gen)) == 50
    assert "'post_process': 'subword_nmt'" in err  # the setting's EVAL_BPE
    # a sentencepiece setting (EVAL_BPE unset: train-at.sh's default) scores detokenized pieces, not "@@ " units
    _, err = recipe("generate.sh", {**common, "SETTING": "multi30k-verifier", "CHECKPOINT": str(ckpt / "checkpoint_avg2.pt"),
                                    "GEN": str(tmp_path / "gen-spm.txt")})
    assert "'post_process': 'sentencepiece'" in err

    stdout, _ = recipe("evaluate-bleu.sh", {"GEN": str(gen), "TGT_LANG": "de", "DETOK": "none",
                                            "REF_RAW": str(out / "raw" / "test.de")})
    scores = dict(line.split("=", 1) for line in stdout.strip().splitlines() if "=" in line)
    assert scores["sentences"] == "50"
    assert 0.0 <= float(scores["tokenized_bleu"]) <= 100.0
    assert 0.0 <= float(scores["sacrebleu"]) <= 100.0
    assert 0.0 <= float(scores["repetition_ratio"]) <= 1.0
    # a reference with another line count: sacreBLEU's own reason in one line, not a silent empty score
    short = tmp_path / "short.de"
    short.write_text("".join(open(out / "raw" / "test.de").readlines()[:10]))
    proc = subprocess.run(["bash", str(RECIPES / "evaluate-bleu.sh")], text=True, capture_output=True, timeout=120,
                          env={**os.environ, "PATH": os.pathsep.join([str(BIN_DIR), os.environ.get("PATH", "")]),
                               "GEN": str(gen), "TGT_LANG": "de", "DETOK": "none", "REF_RAW": str(short)})
    assert proc.returncode != 0 and "sacreBLEU: " in proc.stderr and "lengths" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert "compound_split=1" in scores["tokenized_bleu_line"]


@pytest.mark.slow
def test_dry_run_multi30k_sentencepiece(tmp_path):
    raw = tmp_path / "multi30k" / "raw"
    raw.mkdir(parents=True)
    rng = random.Random(1)
    for split, n in (("train", 120), ("val", 20), ("test_2016_flickr", 20), ("test_2017_flickr", 20)):
        write_parallel(raw / f"{split}.en", raw / f"{split}.de", n, rng)
    out = tmp_path / "out"
    recipe("data/prepare-multi30k.sh", {"DRY_RUN": "1", "MULTI30K_DIR": str(raw), "OUT_DIR": str(out),
                                        "DRY_VOCAB_SIZE": "60"})
    for name in ("dict.en.txt", "train.en-de.en.bin", "test1.en-de.de.bin"):
        assert (out / "bin" / name).exists(), name
    assert (out / "raw" / "test.de").read_text() == (raw / "test_2016_flickr.de").read_text()
    assert (out / "spm" / "spm.model").exists()


@pytest.fixture
def stub_bin(tmp_path):
    """fairseq-train and torchrun stubs that print their command line, and a PYTHON stub that passes train-at.sh's
    check that it imports torch and fairseq (the real one takes ~2 s to; that check's failure:
    test_training_without_data_or_environment_is_one_line)."""
    stub = tmp_path / "bin"
    stub.mkdir()
    for name in ("fairseq-train", "torchrun"):
        (stub / name).write_text(f'#!/usr/bin/env bash\necho {name} "$@"\n')
        (stub / name).chmod(0o755)
    # a PYTHON that passes need_fairseq's look-up of torch and fairseq, and nothing else
    (stub / "python-with-fairseq").write_text('#!/usr/bin/env bash\ncase "$*" in *find_spec*) ;; *) exit 1 ;; esac\n')
    (stub / "python-with-fairseq").chmod(0o755)
    return stub


def run_train_at(stub_bin, *options, **env):
    """train-at.sh ``options`` with the stubs first on PATH and as PYTHON, on a data folder holding only its source
    dictionary (unless ``env`` names another DATA or PYTHON)."""
    data = stub_bin.parent / "data"
    data.mkdir(exist_ok=True)
    (data / "dict.en.txt").write_text("w 1\n")
    path = os.pathsep.join([str(stub_bin), str(BIN_DIR), os.environ.get("PATH", "")])
    return subprocess.run(["bash", str(RECIPES / "train-at.sh"), *options], text=True, capture_output=True, cwd=REPO,
                          env={**os.environ, "PATH": path, "DRY_RUN": "0", "DATA": str(data),
                               "PYTHON": str(stub_bin / "python-with-fairseq"), **env}, timeout=60)


def stub_train(stub_bin, **env):
    """train-at.sh's fairseq-train command line."""
    proc = run_train_at(stub_bin, **env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


@pytest.mark.slow
@pytest.mark.parametrize("ngpus,nnodes,freq", [(8, 1, 4), (4, 1, 8), (1, 1, 32), (8, 2, 2)])
def test_paper_batch_kept_for_any_gpu_count(stub_bin, tmp_path, ngpus, nnodes, freq):
    argv = stub_train(stub_bin, SETTING="wmt14-ende-verifier", NGPUS=str(ngpus), NNODES=str(nnodes),
                      SAVE_DIR=str(tmp_path / "s"), LAUNCHER="torchrun" if nnodes > 1 else "local")
    opt = lambda name: argv[argv.index(name) + 1]  # noqa: E731
    assert int(opt("--update-freq")) == freq and int(opt("--max-tokens")) == 20000
    assert ngpus * nnodes * int(opt("--max-tokens")) * int(opt("--update-freq")) == 8 * 20000 * 4  # Table 7: 8 V100
    assert opt("--lr") == "1e-3" and opt("--clip-norm") == "3.0" and opt("--weight-decay") == "0.00001"
    assert opt("--warmup-updates") == "4000" and opt("--max-update") == "100000"
    assert "--fp16" in argv and "--share-all-embeddings" in argv
    if nnodes > 1:
        assert argv[0] == "torchrun" and opt("--nnodes") == "2"


@pytest.mark.slow
def test_the_log_names_the_sizes_that_options_after_the_name_override(stub_bin, tmp_path):
    proc = run_train_at(stub_bin, "--decoder-layers", "1", "--encoder-embed-dim", "64", SETTING="multi30k-verifier",
                        CPU="1", SAVE_DIR=str(tmp_path / "s"))
    assert proc.returncode == 0, proc.stderr
    assert "transformer 3+1 layers, dim 64 on" in proc.stderr
    argv = proc.stdout.split()
    last = max(i for i, arg in enumerate(argv) if arg == "--decoder-layers")  # fairseq-train keeps the last
    assert argv[last + 1] == "1"


@pytest.mark.slow
def test_autocast_bf16_trains_the_plugin_task_under_cpu_autocast(stub_bin, tmp_path):
    """AUTOCAST=bf16 on a CPU: --cpu-autocast bf16, and fairseq's translation task becomes the plugin's (which has
    the option); off, or on a GPU, neither; any other value is a one-line error before fairseq-train."""
    common = dict(SETTING="multi30k-verifier", SAVE_DIR=str(tmp_path / "s"))
    argv = stub_train(stub_bin, CPU="1", AUTOCAST="bf16", **common)
    assert argv[argv.index("--task") + 1] == "speculative_translation"
    assert argv[argv.index("--cpu-autocast") + 1] == "bf16" and "--cpu" in argv
    for env in (dict(CPU="1", AUTOCAST="off"), dict(CPU="0", AUTOCAST="bf16", NGPUS="1")):
        argv = stub_train(stub_bin, **env, **common)
        assert argv[argv.index("--task") + 1] == "translation" and "--cpu-autocast" not in argv
    proc = run_train_at(stub_bin, CPU="1", AUTOCAST="fp8", **common)
    errors = [line for line in proc.stderr.splitlines() if "ERROR" in line]
    assert proc.returncode != 0 and "fairseq-train" not in proc.stdout
    assert len(errors) == 1 and "AUTOCAST must be off|bf16|auto" in errors[0], proc.stderr


@pytest.mark.slow
def test_small_drafter_setting_trains_under_autocast_where_the_cpu_has_it(stub_bin, tmp_path):
    """The drafter setting of bring-your-own-model.sh on a CPU: AUTOCAST defaults to auto, so bfloat16 autocast
    where this CPU has the kernels (the real Python decides), and AUTOCAST=off still turns it off."""
    from fairseq_plugins.training.cpu_autocast import bf16_supported
    common = dict(SETTING="small-drafter", SAVE_DIR=str(tmp_path / "s"), CPU="1", PYTHON=sys.executable)
    argv = stub_train(stub_bin, **common)
    assert ("--cpu-autocast" in argv) == bf16_supported()
    if bf16_supported():
        assert argv[argv.index("--cpu-autocast") + 1] == "bf16"
    assert "--cpu-autocast" not in stub_train(stub_bin, AUTOCAST="off", **common)


@pytest.mark.slow
def test_training_without_data_or_environment_is_one_line(stub_bin, tmp_path):
    """train-at.sh (verifiers, teachers, drafters) stops before fairseq-train: a data folder without the
    source dictionary, or a PYTHON that cannot import torch and fairseq (no README install active)."""
    no_fairseq = stub_bin / "python-without-fairseq"
    no_fairseq.write_text("#!/usr/bin/env bash\nexit 1\n")
    no_fairseq.chmod(0o755)
    for extra, message in (({"DATA": str(tmp_path / "absent")}, f"DATA={tmp_path / 'absent'}/dict.en.txt"),
                           ({"PYTHON": str(no_fairseq)}, "cannot import torch and fairseq")):
        proc = run_train_at(stub_bin, CPU="1", SAVE_DIR=str(tmp_path / "s"), **extra)
        assert proc.returncode != 0 and "fairseq-train" not in proc.stdout
        errors = [line for line in proc.stderr.splitlines() if "ERROR" in line]
        assert len(errors) == 1 and message in errors[0], proc.stderr


def test_repetition_ratio():
    assert count_repetitions("a a b b b c".split()) == 3
    assert repetition_ratio(["a a b", "c d"]) == pytest.approx(1 / 5)
    assert repetition_ratio(["x@@ y x@@ y"]) == pytest.approx(1 / 2)        # words: "xy xy"
    assert repetition_ratio(["x@@ y x@@ y"], unit="subword") == 0.0
    assert repetition_ratio([]) == 0.0
    assert fairseq_hypotheses(["H-1\t-1\tb b", "S-0\tq", "H-0\t-2\ta"]) == ["a", "b b"]


def test_compound_split():
    proc = subprocess.run([sys.executable, str(RECIPES / "lib" / "text_tools.py"), "compound-split"],
                          input="ein well-known state-of-the-art Test\n", text=True, capture_output=True)
    assert proc.stdout == "ein well ##AT##-##AT## known state ##AT##-##AT## of ##AT##-##AT## the ##AT##-##AT## art Test\n"
