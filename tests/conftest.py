"""Shared fixtures: tiny synthetic corpora and models, trained with the real console scripts.

Every test runs with one torch thread (a 2-core machine slows down many times over when
torch oversubscribes threads under load), set here before torch is imported.
"""
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
# decoders defined by the test suite register like the plugin's own (also in the console scripts run)
os.environ["FAIRSEQ_PLUGINS_DECODERS"] = str(Path(__file__).resolve().parent / "decoders" / "repeat_last.py")

import pytest  # noqa: E402
import torch  # noqa: E402
from filelock import FileLock  # noqa: E402

torch.set_num_threads(1)

BIN_DIR = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[1]
PLUGIN_DIR = REPO / "fairseq_plugins"  # pass as --user-dir: the working tree's plugin
TINY_TRANSFORMER = [
    "--arch", "transformer", "--encoder-layers", "2", "--decoder-layers", "2",
    "--encoder-embed-dim", "32", "--decoder-embed-dim", "32",
    "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64",
    "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
    "--share-all-embeddings", "--dropout", "0.1",
]
TRAIN_FLAGS = [
    "--optimizer", "adam", "--lr", "0.005", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "10",
    "--max-tokens", "1000", "--no-progress-bar", "--log-interval", "10", "--seed", "1", "--cpu",
    "--num-workers", "0",
]


def _installed_compat_is_current():
    """The shims load from site-packages at interpreter start (.pth), not from the tree."""
    import fairseq_plugins_compat

    installed = Path(fairseq_plugins_compat.__file__).parent
    return all((installed / f.name).exists() and (installed / f.name).read_bytes() == f.read_bytes()
               for f in (REPO / "fairseq_plugins_compat").glob("*.py"))


if not _installed_compat_is_current():
    pytest.exit("the installed fairseq_plugins_compat differs from the working tree: run `bash install.sh`", returncode=2)


def ctranslate2_rows():
    """The CTranslate2 rows of a recipe table at its default compute types (``auto``: those of float32, int8,
    int16 and bfloat16 this CTranslate2 runs on a CPU), greedy rows first; none without the package."""
    import importlib.util

    if importlib.util.find_spec("ctranslate2") is None:
        return []
    import ctranslate2

    from fairseq_plugins.bench import ct2

    types = ct2.compute_types(ctranslate2, "auto", "cpu", False)[0]
    return [f"{search} {compute_type} (ctranslate2)" for search in ("beam1", "beam5") for compute_type in types]


def cli(name):
    """Path of an installed console script (``fairseq-train`` etc.)."""
    path = BIN_DIR / name
    return str(path) if path.exists() else shutil.which(name)


def run_cli(name, *args, input=None, env=None, check=True, cwd=None):
    """Run a console script; return the CompletedProcess (stdout+stderr text)."""
    pythonpath = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    full_env = {**os.environ, "PYTHONPATH": pythonpath, **(env or {})}
    proc = subprocess.run(
        [cli(name), *map(str, args)], input=input, env=full_env, cwd=cwd,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"{name} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return proc


def write_reverse_corpus(directory, sizes=(("train", 600), ("valid", 40), ("test", 24)), seed=0, vocab=24, max_len=10):
    """Source: random words; target: the same words reversed (a task tiny models learn)."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(vocab)]
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for split, n in sizes:
        with open(directory / f"{split}.src", "w") as fs, open(directory / f"{split}.tgt", "w") as ft:
            for _ in range(n):
                sent = [rng.choice(words) for _ in range(rng.randint(1, max_len))]
                fs.write(" ".join(sent) + "\n")
                ft.write(" ".join(reversed(sent)) + "\n")
    return directory


def preprocess(raw_dir, dest_dir):
    run_cli(
        "fairseq-preprocess", "--source-lang", "src", "--target-lang", "tgt",
        "--trainpref", f"{raw_dir}/train", "--validpref", f"{raw_dir}/valid", "--testpref", f"{raw_dir}/test",
        "--destdir", dest_dir, "--joined-dictionary", "--workers", "1",
    )
    return Path(dest_dir)


def train(data_dir, save_dir, max_update=60, extra=()):
    run_cli("fairseq-train", data_dir, *TINY_TRANSFORMER, *TRAIN_FLAGS, "--max-update", max_update,
            "--save-dir", save_dir, *extra)
    return Path(save_dir) / "checkpoint_last.pt"


def translation_task(data_dir, src="src", tgt="tgt"):
    """fairseq-train's ``translation`` task on ``data_dir``, every option at fairseq's default."""
    from fairseq import options, tasks

    return tasks.setup_task(options.parse_args_and_arch(options.get_training_parser(), [
        str(data_dir), "--task", "translation", "--arch", "transformer", "-s", src, "-t", tgt]))


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist's ``--dist loadgroup`` (pytest.ini) the tests that share a module- or class-scoped
    fixture form one group, run by one worker, which builds that fixture once; every other test goes to
    whichever worker is free. (Session-scoped fixtures are built once per run: ``built_once``.)

    The workers take the tests in the order of ``items`` (pytest.ini: --no-loadscope-reorder): the longest
    first, so that no worker is left alone with a long one at the end."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items[:] = sorted(items, key=lambda item: start_order(item.path, slow_files))  # stable: files stay in one piece
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        fixtures = getattr(item, "_fixtureinfo", None)
        if fixtures and any(fixture.scope in ("module", "class")
                            for defs in fixtures.name2fixturedefs.values() for fixture in defs):
            group = item.nodeid.split("::")[0]
            item.add_marker(pytest.mark.xdist_group(group))
            if os.environ.get("PYTEST_XDIST_WORKER") and not hasattr(item, "_nodeid") and hasattr(item, "_id"):
                # pytest >= 9 keeps the id in _id: pytest-xdist (3.8) sets _nodeid, in vain, to add the group to it,
                # and the group would be lost (each worker then builds the fixture)
                item._id = type(item._id).parse(f"{item.nodeid}@{group}")


# the test files with runs of a minute or more (recipes end to end), longest first
LONGEST_FILES = ("test_double_token_cli.py", "test_multi30k_dry_run.py", "test_byo_recipe.py",
                 "test_recipes_dry_run.py", "test_bench_demo_recipe.py")


def start_order(path, slow_files):
    """A test file's place: the files of LONGEST_FILES in that order, then the files among ``slow_files`` (those
    holding end-to-end tests), then the others."""
    if path.name in LONGEST_FILES:
        return LONGEST_FILES.index(path.name)
    return len(LONGEST_FILES) + (path not in slow_files)


def built_once(tmp_path_factory, name, build):
    """``build(folder)`` run once per test run, by whichever pytest-xdist worker asks first (the others wait
    for it and reuse the folder): the run's shared temporary folder / ``name``, returned."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the workers' folders are popen-gw0, popen-gw1, ... in the run's folder
    folder, done = base / name, base / f"{name}.done"
    with FileLock(str(base / f"{name}.lock")):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # left by a failed build
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def reverse_data(tmp_path_factory):
    """Binarized synthetic reverse-task corpus (joined dictionary)."""
    root = built_once(tmp_path_factory, "reverse", lambda root: preprocess(write_reverse_corpus(root / "raw"),
                                                                           root / "bin"))
    return root / "bin"


@pytest.fixture(scope="session")
def tiny_checkpoint(reverse_data, tmp_path_factory):
    """A 2-layer post-norm transformer trained a few dozen updates on ``reverse_data``."""
    return built_once(tmp_path_factory, "ckpt", lambda save: train(reverse_data, save, max_update=60)) \
        / "checkpoint_last.pt"


@pytest.fixture(scope="session")
def stock_greedy(reverse_data, tiny_checkpoint, tmp_path_factory):
    """``stock_greedy(batch_size)``: the stdout of the stock fairseq-generate --beam 1 with ``tiny_checkpoint`` on
    ``reverse_data``'s test split (--max-len-b 30) at that batch size, which the parity tests through the console
    scripts compare with; run once per test run and batch size."""
    def output(batch_size):
        def build(folder):
            (folder / "generate.out").write_text(run_cli(
                "fairseq-generate", reverse_data, "--path", tiny_checkpoint, "--gen-subset", "test",
                "--batch-size", batch_size, "--max-len-b", 30, "--beam", 1).stdout)

        return (built_once(tmp_path_factory, f"stock_greedy_b{batch_size}", build) / "generate.out").read_text()

    return output


@pytest.fixture(scope="session")
def stock_interactive_greedy(reverse_data, tiny_checkpoint, tmp_path_factory):
    """(input lines, an empty one among them; the stdout of the stock fairseq-interactive --beam 1 with
    ``tiny_checkpoint`` on them), which the parity tests through fairseq-interactive compare with; run once."""
    lines = "w1 w2 w3 w4\n\nw5 w6\n"

    def build(folder):
        (folder / "interactive.out").write_text(run_cli(
            "fairseq-interactive", reverse_data, "--path", tiny_checkpoint, "--source-lang", "src",
            "--target-lang", "tgt", "--beam", 1, input=lines).stdout)

    return lines, (built_once(tmp_path_factory, "stock_interactive_greedy", build) / "interactive.out").read_text()


def train_drafter(data, verifier, save_dir, block_size=4, max_update=120, shared_encoder=False):
    """A tiny block drafter trained with fairseq-train from ``verifier``; ``shared_encoder``: reading the
    verifier's encoder output (what ``--cuda-graphs`` needs, as the demo drafter)."""
    run_cli("fairseq-train", data, "--user-dir", PLUGIN_DIR, "--task", "speculative_translation",
            "--arch", "block_drafter_tiny", "--criterion", "glancing_block_loss", "--block-size", block_size,
            "--init-from-verifier", verifier, *TRAIN_FLAGS, *(["--share-verifier-encoder"] if shared_encoder else []),
            "--max-update", max_update, "--save-dir", save_dir, "--no-epoch-checkpoints")
    return Path(save_dir) / "checkpoint_last.pt"


@pytest.fixture(scope="session")
def drafter(reverse_data, tiny_checkpoint, tmp_path_factory):
    """A tiny block drafter (k = 4) trained 120 updates from ``tiny_checkpoint``."""
    return built_once(tmp_path_factory, "drafter", lambda save: train_drafter(reverse_data, tiny_checkpoint, save)) \
        / "checkpoint_last.pt"


@pytest.fixture(scope="session")
def shared_drafter(reverse_data, tiny_checkpoint, tmp_path_factory):
    """A tiny block drafter (k = 4) trained 120 updates from ``tiny_checkpoint``, sharing its encoder."""
    return built_once(tmp_path_factory, "shared_drafter",
                      lambda save: train_drafter(reverse_data, tiny_checkpoint, save, shared_encoder=True)) \
        / "checkpoint_last.pt"


GEC_FIXTURES = REPO / "tests" / "fixtures" / "gec"


@pytest.fixture(scope="session")
def gec_data(tmp_path_factory):
    """recipes/data/prepare-gec-synthetic.sh's dry run on tests/fixtures/gec, once per run: (its OUT_DIR, holding
    raw/, spm/spm.model and bin/ (train, valid, test = JFLEG dev, test1 = CoNLL-2013); its env; its log)."""
    def env(out):
        return {"DRY_RUN": "1", "DATA_DIR": str(GEC_FIXTURES), "OUT_DIR": str(out), "RUNS": str(out / "runs")}

    def build(out):
        from test_recipes_dry_run import recipe

        (out / "prepare.log").write_text(recipe("data/prepare-gec-synthetic.sh", env(out))[1])

    out = built_once(tmp_path_factory, "gec-data", build)
    return out, env(out), (out / "prepare.log").read_text()


@pytest.fixture(scope="session")
def gec_model(gec_data, tmp_path_factory):
    """(``gec_data``'s bin/, a tiny transformer that learned its test sets by heart in 100 updates):
    ``--train-subset test`` reads test and test1 (fairseq combines a split with its numbered siblings), so that the
    model outputs corrections worth scoring and copies the rest of those sentences (drafts that iad accepts)."""
    data = gec_data[0] / "bin"
    save = built_once(tmp_path_factory, "gec-model", lambda save: train(data, save, max_update=100, extra=[
        "--train-subset", "test", "--dropout", "0", "--lr-scheduler", "fixed", "--lr", "0.01",
        "--disable-validation", "--no-epoch-checkpoints"]))
    return data, save / "checkpoint_last.pt"


@pytest.fixture(autouse=True)
def pack_small_weights(monkeypatch):
    """The tiny test models have only small weights, which the products keep on F.linear by
    default (linears.SMALL_WEIGHT): in-process tests pack them all, so that the packed and
    int8 paths stay tested (tests/test_fast_verifier.py checks the default itself)."""
    from fairseq_plugins.decoding import linears

    monkeypatch.setattr(linears, "SMALL_WEIGHT", 0)
