"""What a new user meets first: bad paths and options give one line, fairseq-interactive
survives an over-long line, failed runs leave no empty files, no noise on every command
(genuine warnings still show), an editable install works, the quickstart says where its
models are."""
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import PLUGIN_DIR, REPO, run_cli
from test_cli_end_to_end import assert_one_line_error, bad_checkpoint, hypotheses

PLUGIN = ["--user-dir", PLUGIN_DIR, "--task", "speculative_translation"]
LANGS = ["--source-lang", "src", "--target-lang", "tgt"]


# -- 1. checkpoint paths ------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("path_kind", ["readme", "dictionary", "missing"])
def test_bad_drafter_path_gives_one_line_error(reverse_data, tiny_checkpoint, tmp_path, path_kind):
    bad, message = bad_checkpoint(path_kind, tmp_path, tiny_checkpoint, reverse_data)
    proc = run_cli("fairseq-generate", reverse_data, *PLUGIN, "--path", tiny_checkpoint, "--gen-subset", "test",
                   "--decoding", "specdec", "--drafter-path", bad, check=False)
    assert_one_line_error(proc, "fairseq-generate", message)


# -- 2. --sampling --------------------------------------------------------------------------------

@pytest.mark.slow
def test_sampling_with_a_plugin_decoding_is_one_line(reverse_data, tiny_checkpoint):
    proc = run_cli("fairseq-generate", reverse_data, *PLUGIN, "--path", tiny_checkpoint, "--gen-subset", "test",
                   "--decoding", "specdec", "--drafter-path", tiny_checkpoint, "--sampling", check=False)
    assert_one_line_error(proc, "fairseq-generate", "--decoding specdec does not support: sampling (use --decoding beam)")
    proc = run_cli("fairseq-interactive", reverse_data, *PLUGIN, *LANGS, "--path", tiny_checkpoint,
                   "--decoding", "iad", "--sampling", input="w1\n", check=False)
    assert_one_line_error(proc, "fairseq-interactive", "--decoding iad does not support: sampling")


@pytest.mark.slow
def test_fairseqs_own_input_assertions_are_one_line(reverse_data, tiny_checkpoint):
    proc = run_cli("fairseq-generate", reverse_data, "--path", tiny_checkpoint, "--sampling", check=False)
    assert_one_line_error(proc, "fairseq-generate", "--sampling requires --nbest to be equal to --beam")


@pytest.mark.slow
@pytest.mark.parametrize("model", ["none", "missing", "unreadable"])
def test_bad_sentencepiece_model_is_one_line(reverse_data, tiny_checkpoint, tmp_path, model):
    """fairseq opens --sentencepiece-model deep in its BPE registry (a traceback); stock and plugin runs alike."""
    unreadable = tmp_path / "unreadable.model"
    unreadable.write_text("not a sentencepiece model\n")
    option, message = {
        "none": ([], "--bpe sentencepiece needs --sentencepiece-model"),
        "missing": (["--sentencepiece-model", tmp_path / "absent.model"], "--sentencepiece-model not found"),
        "unreadable": (["--sentencepiece-model", unreadable], f"--sentencepiece-model {unreadable} is not readable"),
    }[model]
    bpe = ["--bpe", "sentencepiece", *option]
    proc = run_cli("fairseq-generate", reverse_data, "--path", tiny_checkpoint, "--gen-subset", "test", *bpe,
                   check=False)
    assert_one_line_error(proc, "fairseq-generate", message)
    proc = run_cli("fairseq-interactive", reverse_data, *PLUGIN, *LANGS, "--path", tiny_checkpoint,
                   "--decoding", "iad", *bpe, input="w1\n", check=False)
    assert_one_line_error(proc, "fairseq-interactive", message)


@pytest.mark.slow
@pytest.mark.parametrize("plugin", [[], [*PLUGIN, "--decoding", "iad"]], ids=["stock", "plugin"])
def test_a_split_the_data_lacks_is_one_line(reverse_data, tiny_checkpoint, plugin):
    proc = run_cli("fairseq-generate", reverse_data, *plugin, "--path", tiny_checkpoint, "--gen-subset", "tset",
                   check=False)
    assert_one_line_error(proc, "fairseq-generate", f"--gen-subset tset: Dataset not found: tset ({reverse_data})")


@pytest.mark.slow
@pytest.mark.parametrize("plugin", [[], [*PLUGIN, "--decoding", "iad"]], ids=["stock", "plugin"])
def test_a_missing_data_folder_is_one_line(tiny_checkpoint, tmp_path, plugin):
    proc = run_cli("fairseq-generate", tmp_path / "nowhere", *plugin, *LANGS, "--path", tiny_checkpoint, check=False)
    assert_one_line_error(proc, "fairseq-generate", f"data folder not found: {tmp_path / 'nowhere'}")


@pytest.mark.slow
def test_a_data_folder_without_a_dictionary_is_one_line(reverse_data, tiny_checkpoint, tmp_path):
    folder = tmp_path / "bin"
    shutil.copytree(reverse_data, folder)
    (folder / "dict.tgt.txt").unlink()
    proc = run_cli("fairseq-generate", folder, *PLUGIN, *LANGS, "--path", tiny_checkpoint, check=False)
    assert_one_line_error(proc, "fairseq-generate", f"{folder}: no dict.tgt.txt")


@pytest.mark.slow
@pytest.mark.parametrize("plugin", [[], [*PLUGIN, "--decoding", "iad"]], ids=["stock", "plugin"])
def test_dictionaries_that_do_not_fit_the_checkpoint_are_one_line(reverse_data, tiny_checkpoint, tmp_path, plugin):
    """A data folder whose dictionaries are not the checkpoint's (fairseq: a size mismatch traceback from
    load_state_dict) names both sizes and the dictionary file."""
    folder = tmp_path / "bin"
    shutil.copytree(reverse_data, folder)
    trained = len((reverse_data / "dict.src.txt").read_text().splitlines()) + 4  # + fairseq's 4 special symbols
    for name in ("dict.src.txt", "dict.tgt.txt"):  # a joined dictionary: both sides grow alike
        with open(folder / name, "a") as f:
            f.writelines(f"extra{i} 1\n" for i in range(3))
    proc = run_cli("fairseq-generate", folder, *plugin, "--path", tiny_checkpoint, "--gen-subset", "test", check=False)
    assert_one_line_error(proc, "fairseq-generate", f"the checkpoint's source embeddings have {trained:,} entries, "
                                                     f"{folder / 'dict.src.txt'} has {trained + 3:,}")


@pytest.mark.slow
def test_a_folder_without_a_language_pair_asks_for_one(reverse_data, tiny_checkpoint, tmp_path):
    """fairseq-interactive on a folder of dictionaries only (as a shipped model's) without -s/-t."""
    for name in ("dict.src.txt", "dict.tgt.txt"):
        shutil.copy(reverse_data / name, tmp_path / name)
    proc = run_cli("fairseq-interactive", tmp_path, *PLUGIN, "--path", tiny_checkpoint, input="w1\n", check=False)
    assert_one_line_error(proc, "fairseq-interactive", "give --source-lang and --target-lang")


@pytest.mark.slow
@pytest.mark.parametrize("user_dir", [[], ["--user-dir", PLUGIN_DIR]], ids=["no-user-dir", "user-dir"])
def test_a_plugin_option_without_its_task_names_the_task(reverse_data, tiny_checkpoint, user_dir):
    proc = run_cli("fairseq-generate", reverse_data, *user_dir, "--path", tiny_checkpoint, "--decoding", "iad",
                   "--target-order=bidirectional", "--bogus", check=False)
    assert_one_line_error(proc, "fairseq-generate",
                          "unrecognized arguments: --decoding iad --target-order=bidirectional --bogus")
    needs = r"--user-dir \S+fairseq_plugins --task" if not user_dir else "--task"
    assert re.search(f"\\(--decoding: an option of {needs} speculative_translation; "
                     f"--target-order: an option of {needs} double_token_translation\\)$", proc.stderr.strip())


# -- 3. fairseq-interactive: an over-long line ----------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("plugin", [[], [*PLUGIN, "--decoding", "iad"]], ids=["stock", "plugin"])
def test_interactive_reports_an_over_long_line_and_goes_on(reverse_data, tiny_checkpoint, plugin):
    lines = "w1 w2\n" + " ".join(["w1"] * 1100) + "\nw3 w4\n"
    proc = run_cli("fairseq-interactive", reverse_data, *plugin, *LANGS, "--path", tiny_checkpoint, "--beam", 1,
                   "--buffer-size", 2, "--batch-size", 2, input=lines, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(hypotheses(proc.stdout)) == [0, 2]
    assert "fairseq-interactive: line 2 skipped: 1101 tokens, more than the 1024 source tokens the model takes" \
        in proc.stderr
    assert "np.int" not in proc.stderr and "Traceback" not in proc.stderr


# -- 4. --results-path ----------------------------------------------------------------------------

@pytest.mark.slow
def test_failed_run_leaves_no_results_file(reverse_data, tiny_checkpoint, tmp_path):
    fresh, existing = tmp_path / "fresh", tmp_path / "existing"
    existing.mkdir()
    for results in (fresh, existing):
        proc = run_cli("fairseq-generate", reverse_data, "--path", PLUGIN_DIR.parent / "README.md",
                       "--results-path", results, check=False)
        assert proc.returncode != 0
    assert not fresh.exists()  # created by the failed run: removed
    assert existing.is_dir() and list(existing.iterdir()) == []
    run_cli("fairseq-generate", reverse_data, "--path", tiny_checkpoint, "--results-path", existing,
            "--gen-subset", "test", "--max-len-b", 10)
    assert len(hypotheses((existing / "generate-test.txt").read_text())) == 24  # kept on success


# -- 5. noise -------------------------------------------------------------------------------------

NOISE = ("tensorboardX", "pin_memory", "Warning", "could not import the checkpoint's user dir")


@pytest.mark.slow
def test_no_noise_on_a_plain_run(reverse_data, tiny_checkpoint):
    proc = run_cli("fairseq-interactive", reverse_data, *PLUGIN, *LANGS, "--path", tiny_checkpoint,
                   "--decoding", "iad", input="w1 w2\n")
    assert len(hypotheses(proc.stdout)) == 1
    assert not [word for word in NOISE if word in proc.stdout + proc.stderr], proc.stderr[-3000:]


GENUINE_WARNINGS = """
import warnings
import fairseq  # installs the filters
warnings.warn("a genuine warning", UserWarning)
warnings.warn("`torch.cuda.amp.autocast(args...)` is deprecated (from user code)", FutureWarning)
exec(compile('import warnings; warnings.warn("`torch.cuda.amp.autocast(args...)` is deprecated (fairseq)", '
             'FutureWarning)', 'fairseq_code.py', 'exec'), {"__name__": "fairseq.fake_module"})
"""


@pytest.mark.slow
@pytest.mark.parametrize("python_flags", [[], ["-W", "default"]])
def test_genuine_warnings_still_show(tmp_path, python_flags):
    proc = subprocess.run([sys.executable, *python_flags, "-c", GENUINE_WARNINGS], capture_output=True, text=True,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "UserWarning: a genuine warning" in proc.stderr
    assert "(from user code)" in proc.stderr
    assert ("deprecated (fairseq)" in proc.stderr) == bool(python_flags)  # -W: the user asked to see all
    assert "tensorboardX" not in proc.stderr


@pytest.mark.slow
def test_help_of_the_plugin_task_is_clean():
    proc = run_cli("fairseq-generate", *PLUGIN, "--help")
    assert "--drafter-path" in proc.stdout and "--decoding" in proc.stdout
    assert "--extractor-mode" not in proc.stdout  # wav2vec2's options (generate's placeholder --arch)
    assert proc.stdout.count("usage: ") == 1 and proc.stderr == ""


# -- 6. editable install --------------------------------------------------------------------------

def _pip_supports_python_option():
    out = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True).stdout
    major, minor = map(int, re.search(r"pip (\d+)\.(\d+)", out).groups())
    return (major, minor) >= (22, 3)


@pytest.mark.slow
@pytest.mark.skipif(not _pip_supports_python_option(), reason="pip --python needs pip >= 22.3")
def test_editable_install_activates_the_shims(tmp_path):
    """``pip install -e .`` into a fresh venv that sees this environment's packages
    (appended to sys.path, so their .pth files do not run): fairseq imports."""
    import shutil

    source = tmp_path / "src"
    source.mkdir()
    for name in ("setup.py", "pyproject.toml"):
        shutil.copy(REPO / name, source / name)
    for name in ("fairseq_plugins", "fairseq_plugins_compat"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "zz_outer_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps",
                              "--no-build-isolation", "--no-index", "-e", source], capture_output=True, text=True)
    assert install.returncode == 0, install.stderr[-3000:]
    check = subprocess.run([python, "-c", "import fairseq.models.transformer, fairseq_cli.train, sys; "
                                          "print(sys.modules['fairseq_plugins_compat'].__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": ""})
    assert check.returncode == 0, check.stderr[-2000:]
    assert check.stdout.strip().startswith(str(source / "fairseq_plugins_compat"))  # the working tree's shims


# -- 7. the quickstart says where its models are --------------------------------------------------

def test_quickstart_prints_where_its_models_are_and_how_to_reuse_them(tmp_path):
    from fairseq_plugins import quickstart

    lines = "\n".join(quickstart.reuse_instructions(tmp_path / "bin", tmp_path / "v.pt", tmp_path / "d.pt",
                                                    dict(source_lang="src", target_lang="tgt"), workdir=tmp_path))
    assert f"verifier {tmp_path / 'v.pt'}" in lines and f"drafter  {tmp_path / 'd.pt'}" in lines
    assert f"--workdir {tmp_path}" in lines and f"QUICKSTART_DIR={tmp_path} bash quickstart.sh" in lines
    command = lines.splitlines()[-1].split()
    assert command[:2] == ["fairseq-interactive", str(tmp_path / "bin")]
    assert command[command.index("--drafter-path") + 1] == str(tmp_path / "d.pt")


@pytest.mark.slow
def test_quickstart_run_ends_with_the_models_folder(reverse_data, tiny_checkpoint, drafter, tmp_path,
                                                    monkeypatch, capsys):
    from fairseq_plugins import quickstart

    sentences = ["w1 w2 w3", "w4 w5"]
    trained_in = []

    def train_pair(workdir):
        trained_in.append(workdir)
        return reverse_data, tiny_checkpoint, drafter, sentences, dict(source_lang="src", target_lang="tgt")

    monkeypatch.setattr(quickstart, "demo_pair", lambda demo_dir=None: None)
    monkeypatch.setattr(quickstart, "train_pair", train_pair)
    assert quickstart.main(["--workdir", str(tmp_path / "qs")]) == 0
    out = capsys.readouterr().out
    assert trained_in == [tmp_path / "qs"]
    assert f"verifier {tiny_checkpoint}" in out and f"drafter  {drafter}" in out
    assert f"run again with --workdir {tmp_path / 'qs'}" in out
