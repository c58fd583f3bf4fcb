"""recipes/bring-your-own-model.sh and recipes/data/prepare-with-model.sh: a user's trained verifier,
its sentencepiece model and dictionaries plus raw text -> distillation -> drafter -> latency table
(DRY_RUN, CPU); every missing or mismatched input is one error line, never a traceback."""
import os
import re
import shutil
import subprocess
import sys

import pytest
import torch

from conftest import BIN_DIR, REPO, preprocess, train, write_reverse_corpus

RECIPE = REPO / "recipes" / "bring-your-own-model.sh"
PREPARE = REPO / "recipes" / "data" / "prepare-with-model.sh"
SPM = REPO / "recipes" / "lib" / "spm.py"
SPLITS = (("train", 300), ("valid", 30), ("test", 20))

pytestmark = pytest.mark.slow  # every test runs a recipe, most on a verifier trained for them (user_model)


def spm_train(inputs, prefix, vocab):
    subprocess.run([sys.executable, SPM, "train", "--input", ",".join(map(str, inputs)), "--model-prefix", prefix,
                    "--vocab-size", str(vocab), "--soft-vocab-limit"], check=True, capture_output=True)
    return prefix.parent / f"{prefix.name}.model"


def spm_encode(model, src, dest):
    with open(src) as fin, open(dest, "w") as fout:
        subprocess.run([sys.executable, SPM, "encode", "--model", model], stdin=fin, stdout=fout, check=True)


@pytest.fixture(scope="module")
def user_model(tmp_path_factory):
    """What a user brings: raw text (src -> reversed tgt), a sentencepiece model, the dictionaries
    and a tiny verifier trained on them; the verifier's binarized training data is deleted."""
    root = tmp_path_factory.mktemp("byo")
    raw = write_reverse_corpus(root / "raw", sizes=SPLITS)
    model = spm_train([raw / "train.src", raw / "train.tgt"], root / "spm", vocab=40)
    encoded = root / "encoded"
    encoded.mkdir()
    for split, _ in SPLITS:
        for lang in ("src", "tgt"):
            spm_encode(model, raw / f"{split}.{lang}", encoded / f"{split}.{lang}")
    data = preprocess(encoded, root / "verifier-data")
    verifier = train(data, root / "verifier", max_update=60)
    dicts = root / "dicts"
    dicts.mkdir()
    for lang in ("src", "tgt"):
        shutil.copy(data / f"dict.{lang}.txt", dicts)
    shutil.rmtree(data)
    shutil.rmtree(encoded)
    return {"VERIFIER": str(verifier), "SPM_MODEL": str(model), "DICT_DIR": str(dicts), "RAW": str(raw),
            "SRC": "src", "TGT": "tgt"}


def run(script, env, timeout=600, cwd=REPO):
    """Run a recipe; return (returncode, stdout+stderr)."""
    path = os.pathsep.join([str(BIN_DIR), os.environ.get("PATH", "")])
    proc = subprocess.run(["bash", str(script)], env={**os.environ, "PATH": path, **env}, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, cwd=cwd)
    return proc.returncode, proc.stdout


def test_end_to_end_dry_run_then_every_stage_skipped(user_model, tmp_path):
    """Stages 1-3 and 6 on a user's model and relative paths; the sequential head and SpecDec++'s drafter
    (stages 4-5) are switched off here: test_multi30k_base_recipe_dry_run runs them through this recipe."""
    relative = {name: os.path.relpath(value, tmp_path) if "/" in value else value for name, value in user_model.items()}
    env = {**relative, "DRY_RUN": "1", "OUT": "out", "RUNS": str(tmp_path / "runs"),  # paths relative to the cwd
           "HEAD_UPDATES": "0", "SPECDEC_PP": "0", "CT2": "0"}
    rc, log = run(RECIPE, env, cwd=tmp_path)
    assert rc == 0, log[-5000:]
    for stage in ("1/6 data", "2/6 distillation", "3/6 drafter", "4/6 no sequential head (HEAD_UPDATES=0)",
                  "5/6 no SpecDec++ drafter (SPECDEC_PP=0)", "6/6 latency"):
        assert stage in log
    out = tmp_path / "out"
    assert sum(1 for _ in open(out / "data" / "spm" / "train.src")) == 200  # DRY_LINES
    assert (out / "distilled" / "bin" / "train.src-tgt.tgt.bin").exists()
    assert (out / "distilled" / "bin" / "train1.src-tgt.tgt.bin").exists()  # the substituted sources' translations
    drafter = torch.load(out / "drafter" / "checkpoint_best.pt", map_location="cpu", weights_only=False)
    model_cfg = drafter["cfg"]["model"]
    assert drafter["cfg"]["task"]["data"] == str(out / "distilled" / "bin")  # absolute: loads from anywhere
    assert (model_cfg.encoder_embed_dim, model_cfg.encoder_layers) == (32, 2)  # the verifier's, not DRY_RUN's 1 layer
    assert not (out / "drafter-head").exists() and not (out / "drafter-beam").exists()
    table = (out / "results" / "latency-test.md").read_text()
    rows = set(re.findall(r"^\| (\S+) \| 1 \|", table, re.M))
    # the recipe's rows, without SpecDec++'s (no drafter of its own: SPECDEC_PP=0)
    assert rows == {"beam1", "greedy", "beam5", "specdec", "specdec:head_candidates=0", "iad", "jacobi", "oracle",
                    "bound"}, table
    for row in ("specdec", "iad"):  # lossless: no output differs from greedy
        assert re.search(rf"^\| {re.escape(row)} \| .* \| 0 \|$", table, re.M), table
    assert (out / "results" / "latency-test.png").read_bytes()[:4] == b"\x89PNG"
    assert table.startswith("**Dry run** (200 lines") and "dry run done" in log  # not to be read as results
    assert not (tmp_path / "runs").exists()  # OUT given: nothing under RUNS
    rc, rerun = run(RECIPE, env, timeout=300, cwd=tmp_path)
    assert rc == 0, rerun[-3000:]
    for done in ("distilled corpus exists", "drafter trained already", "latency table exists"):
        assert done in rerun
    assert (out / "results" / "latency-test.md").read_text().count("**Dry run**") == 1  # marked once
    assert "fairseq_cli.train" not in rerun and "fairseq_cli.preprocess" not in rerun
    # a real run into the dry run's OUT would take its tiny outputs for finished stages: refused in one line
    rc, real = run(RECIPE, {**env, "DRY_RUN": "0"}, timeout=300, cwd=tmp_path)
    assert rc != 0 and "holds a dry run's outputs (DRY_RUN=1): give another OUT" in real, real[-3000:]
    assert "Traceback" not in real and "fairseq_cli" not in real


def test_data_step_uses_the_given_model_and_dictionaries(user_model, tmp_path):
    rc, log = run(PREPARE, {**user_model, "OUT_DIR": str(tmp_path), "DRY_RUN": "0"})
    assert rc == 0, log[-3000:]
    for lang in ("src", "tgt"):
        assert (tmp_path / "bin" / f"dict.{lang}.txt").read_text() == open(f"{user_model['DICT_DIR']}/dict.{lang}.txt").read()
        assert (tmp_path / "bin" / f"test.src-tgt.{lang}.idx").exists()
    assert sum(1 for _ in open(tmp_path / "spm" / "train.src")) == 300
    assert "0.00% of" in log and "replaced" in log


def missing_input_cases(inputs, tmp_path):
    """(variable overrides, text the error line must contain) for each input a user can forget."""
    no_test_tgt = tmp_path / "raw"
    shutil.copytree(inputs["RAW"], no_test_tgt)
    (no_test_tgt / "test.tgt").unlink()
    half_dicts = tmp_path / "dicts"
    half_dicts.mkdir()
    shutil.copy(f"{inputs['DICT_DIR']}/dict.src.txt", half_dicts)
    return {
        "verifier unset": ({"VERIFIER": ""}, "VERIFIER (not set)"),
        "verifier file": ({"VERIFIER": str(tmp_path / "nope.pt")}, f"VERIFIER={tmp_path}/nope.pt"),
        "spm model": ({"SPM_MODEL": str(tmp_path / "nope.model")}, f"SPM_MODEL={tmp_path}/nope.model"),
        "dictionary": ({"DICT_DIR": str(half_dicts)}, f"DICT_DIR/dict.tgt.txt={half_dicts}/dict.tgt.txt"),
        "raw test file": ({"RAW": str(no_test_tgt)}, f"RAW/test.tgt={no_test_tgt}/test.tgt (RAW holds: test.src "
                                                     "train.src train.tgt valid.src valid.tgt; it needs "
                                                     "{train,valid,test}.{src,tgt}"),
        "raw unset": ({"RAW": ""}, "RAW (not set)"),
        "languages": ({"SRC": "", "TGT": ""}, "SRC (not set); TGT (not set)"),
    }


CASES = ["verifier unset", "verifier file", "spm model", "dictionary", "raw test file", "raw unset", "languages"]


@pytest.mark.parametrize("case", CASES)
def test_missing_input_is_one_line_naming_it(user_model, tmp_path, case):
    overrides, expected = missing_input_cases(user_model, tmp_path)[case]
    rc, log = run(RECIPE, {**user_model, **overrides, "OUT": str(tmp_path / "out")})
    assert rc == 1
    assert len(log.strip().splitlines()) == 1, log
    assert "ERROR: missing input(s): " in log and expected in log, log
    assert not (tmp_path / "out").exists()  # nothing ran


def test_swapped_languages_are_one_line_saying_which_to_set(tmp_path):
    """The shipped en->de verifier given SRC=de TGT=en (every input present under those names)."""
    demo = REPO / "checkpoints" / "demo"
    raw = tmp_path / "raw"
    raw.mkdir()
    for split in ("train", "valid", "test"):
        for lang in ("en", "de"):
            (raw / f"{split}.{lang}").write_text("A dog runs.\n")
    env = {"VERIFIER": str(demo / "verifier.pt"), "SPM_MODEL": str(demo / "sentencepiece.model"),
           "DICT_DIR": str(demo), "RAW": str(raw), "SRC": "de", "TGT": "en", "OUT": str(tmp_path / "out"),
           "DRY_RUN": "1"}
    rc, log = run(RECIPE, env, timeout=120)
    assert rc == 1 and len(log.strip().splitlines()) == 1, log
    assert "SRC=de TGT=en, but" in log and "translates en->de: set SRC=en TGT=de" in log, log
    assert not (tmp_path / "out").exists()


def test_every_missing_input_named_at_once(user_model, tmp_path):
    rc, log = run(RECIPE, {**user_model, "VERIFIER": "", "SPM_MODEL": "", "RAW": ""})
    assert rc == 1 and len(log.strip().splitlines()) == 1
    assert "VERIFIER (not set); SPM_MODEL (not set); RAW (not set)" in log


def test_missing_input_of_the_data_step(user_model, tmp_path):
    rc, log = run(PREPARE, {**user_model, "SPM_MODEL": str(tmp_path / "nope.model"), "OUT_DIR": str(tmp_path / "o")})
    assert rc == 1 and len(log.strip().splitlines()) == 1 and f"SPM_MODEL={tmp_path}/nope.model" in log, log


def test_dictionary_of_another_model_is_one_line(user_model, tmp_path):
    """A dictionary whose size differs from the verifier's embeddings: not the one it was trained with."""
    dicts = tmp_path / "dicts"
    shutil.copytree(user_model["DICT_DIR"], dicts)
    with open(dicts / "dict.tgt.txt", "a") as f:
        f.write("extra-1 1\nextra-2 1\n")
    rc, log = run(RECIPE, {**user_model, "DICT_DIR": str(dicts), "OUT": str(tmp_path / "out")})
    assert rc == 1 and "Traceback" not in log and "FAILED" not in log, log
    error = [line for line in log.splitlines() if "ERROR" in line]
    assert len(error) == 1 and f"{dicts}/dict.tgt.txt has" in error[0] and "target embeddings" in error[0], log


def test_sentencepiece_model_that_does_not_fit_the_dictionary_is_one_line(user_model, tmp_path):
    other_text = tmp_path / "other.txt"
    other_text.write_text("".join(f"{'xyz' * (i % 5 + 1)} qq{i % 7} zz{i % 3}\n" for i in range(200)))
    other = spm_train([other_text], tmp_path / "other", vocab=30)
    rc, log = run(RECIPE, {**user_model, "SPM_MODEL": str(other), "OUT": str(tmp_path / "out")})
    assert rc == 1 and "Traceback" not in log and "FAILED" not in log, log
    error = [line for line in log.splitlines() if "ERROR" in line]
    assert len(error) == 1 and f"{other} does not fit" in error[0], log
    assert "FAILED" not in log and "1/4 data" not in log  # checked before the first stage


def test_verifier_that_is_no_checkpoint_is_one_line(user_model, tmp_path):
    not_a_checkpoint = tmp_path / "model.pt"
    not_a_checkpoint.write_text("not a checkpoint\n")
    rc, log = run(RECIPE, {**user_model, "VERIFIER": str(not_a_checkpoint), "OUT": str(tmp_path / "out")})
    assert rc == 1 and "Traceback" not in log and "FAILED" not in log, log
    error = [line for line in log.splitlines() if "ERROR" in line]
    assert len(error) == 1 and str(not_a_checkpoint) in error[0], log


@pytest.mark.parametrize("width,device,setting,arch", [
    (256, "cuda", "small-drafter", "block_drafter"), (512, "cuda", "paper-drafter-table7", "block_drafter"),
    (1024, "cuda", "paper-drafter-table7", "block_drafter_big"), (512, "cpu", "small-drafter", "block_drafter"),
    (1024, "cpu", "small-drafter", "block_drafter_big")])
def test_auto_drafter_follows_the_width_and_stays_small_on_a_cpu(width, device, setting, arch):
    """DRAFTER_SETTING=auto: the paper's drafter (300K updates of 128K tokens) only where it can train, on CUDA."""
    function = subprocess.run(["sed", "-n", "/^choose_drafter()/,/^}/p", str(RECIPE)], text=True,
                              capture_output=True, check=True).stdout
    proc = subprocess.run(["bash", "-c", f'{function}\nchoose_drafter; echo "$DRAFTER_SETTING $DRAFTER_ARCH"'],
                          env={**os.environ, "VERIFIER_EMBED_DIM": str(width), "DEVICE": device,
                               "DRAFTER_SETTING": "auto", "DRAFTER_ARCH": "auto"},
                          text=True, capture_output=True, check=True)
    assert proc.stdout.split() == [setting, arch]
