"""End to end through the real console scripts: fairseq-train, fairseq-generate and
fairseq-interactive with ``--task double_token_translation`` on the synthetic reverse task."""
import re

import pytest

from conftest import PLUGIN_DIR, TRAIN_FLAGS, run_cli
from fairseq_plugins_compat.errors import PluginError

pytestmark = pytest.mark.slow

TASK = ["--user-dir", PLUGIN_DIR, "--task", "double_token_translation"]
MODEL = ["--arch", "double_token_transformer_tiny", "--share-all-embeddings",
         "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1"]


def train(data, save_dir, order, max_update, extra=()):
    run_cli("fairseq-train", data, *TASK, "--target-order", order, *MODEL, *TRAIN_FLAGS,
            "--max-update", max_update, "--save-dir", save_dir, "--no-epoch-checkpoints", *extra)
    return save_dir / "checkpoint_last.pt"


def hypotheses(output):
    """``{sentence id: [(score, text), ...]}`` from H- lines."""
    found = {}
    for sid, score, text in re.findall(r"^H-(\d+)\t(\S+)\t?(.*)$", output, flags=re.M):
        found.setdefault(int(sid), []).append((float(score), text))
    return found


@pytest.fixture(scope="module")
def bidirectional_checkpoint(reverse_data, tmp_path_factory):
    """Tiny double-token model, 80 updates, with --eval-bleu (the task's generator in validation)."""
    save_dir = tmp_path_factory.mktemp("double_token_ckpt")
    extra = ["--eval-bleu", "--eval-bleu-args", '{"beam": 2}', "--validate-interval", "8"]
    return train(reverse_data, save_dir, "bidirectional", 80, extra)


def test_generate_beam_nbest_and_greedy(reverse_data, bidirectional_checkpoint):
    common = [reverse_data, *TASK, "--path", bidirectional_checkpoint, "--cpu", "--batch-size", "8"]
    out = run_cli("fairseq-generate", *common, "--beam", "4", "--nbest", "2").stdout
    assert re.search(r"Generate test with beam=4: BLEU4 = \d", out)
    found = hypotheses(out)
    assert sorted(found) == list(range(24)) and all(len(h) == 2 for h in found.values())
    assert all(h[0][0] >= h[1][0] for h in found.values())
    assert "<s>" not in out and "</s>" not in out
    for text, positional in re.findall(r"^D-\d+\t\S+\t?(.*)\nP-\d+\t(.*)$", out, flags=re.M):
        assert len(positional.split()) == len(text.split()) + 1  # + eos (carries the EOD scores)
    greedy = run_cli("fairseq-generate", *common, "--beam", "1").stdout
    assert sorted(hypotheses(greedy)) == list(range(24)) and "BLEU4 =" in greedy


def test_pair_beam_stop_beam_returns_the_best_of_w(reverse_data, bidirectional_checkpoint):
    """--pair-beam-stop beam: one hypothesis per sentence, the best of the W that --nbest W finds."""
    common = [reverse_data, *TASK, "--path", bidirectional_checkpoint, "--cpu", "--batch-size", "8", "--beam", "4"]
    best_of_w = hypotheses(run_cli("fairseq-generate", *common, "--pair-beam-stop", "beam").stdout)
    w_best = hypotheses(run_cli("fairseq-generate", *common, "--nbest", "4").stdout)
    assert sorted(best_of_w) == list(range(24)) and all(len(h) == 1 for h in best_of_w.values())
    assert {sid: h[0] for sid, h in best_of_w.items()} == {sid: h[0] for sid, h in w_best.items()}


def test_interactive(reverse_data, bidirectional_checkpoint):
    out = run_cli("fairseq-interactive", reverse_data, *TASK, "--path", bidirectional_checkpoint, "--cpu",
                  "--beam", "3", "--nbest", "2", input="w1 w2 w3\nw4 w5 w6 w7 w8\n").stdout
    found = hypotheses(out)
    assert sorted(found) == [0, 1] and all(len(h) == 2 for h in found.values())
    assert all(re.fullmatch(r"(w\d+( w\d+)*)?", text) for h in found.values() for _, text in h)


def test_bad_options_are_one_line_errors(reverse_data, bidirectional_checkpoint):
    common = [reverse_data, *TASK, "--path", bidirectional_checkpoint, "--cpu"]
    proc = run_cli("fairseq-generate", *common, "--sampling", "--beam", "2", "--nbest", "2",
                   "--no-repeat-ngram-size", "2", check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "fairseq-generate: error: --target-order bidirectional does not support: --sampling, --no-repeat-ngram-size")
    proc = run_cli("fairseq-generate", *common, "--target-order", "double_l2r", check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "trained with --target-order bidirectional, not double_l2r" in proc.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("order", ["single_r2l", "double_r2l"])
def test_comparison_systems_train_and_generate(reverse_data, tmp_path, order):
    checkpoint = train(reverse_data, tmp_path, order, 20)
    out = run_cli("fairseq-generate", reverse_data, *TASK, "--target-order", order, "--path", checkpoint,
                  "--cpu", "--batch-size", "8", "--beam", "2").stdout
    assert sorted(hypotheses(out)) == list(range(24)) and "BLEU4 =" in out


def test_systems_benchmark_side_by_side(reverse_data, bidirectional_checkpoint, tiny_checkpoint, tmp_path):
    """``python -m fairseq_plugins.bench.systems``: each checkpoint under its own task and order,
    the same sentences as fairseq-generate, ratios relative to the baseline at the same beam."""
    from fairseq_plugins.bench import systems

    out = tmp_path / "systems"
    result = systems.main([str(reverse_data), "--system", f"single={tiny_checkpoint}",
                           "--system", f"pairs={bidirectional_checkpoint}", "--beams", "1,2",
                           "--system", f"again={bidirectional_checkpoint}", "--baseline-of", "again=pairs",
                           "--max-sentences", "8", "--warmup", "1", "--no-progress-bar",
                           "--out-md", str(out / "s.md"), "--out-png", str(out / "s.png"),
                           "--out-json", str(out / "s.json")])
    rows = {(r["system"], r["beam"]): r for r in result["rows"]}
    assert sorted(rows) == [("again", 1), ("again", 2), ("pairs", 1), ("pairs", 2), ("single", 1), ("single", 2)]
    assert rows["pairs", 1]["order"] == "bidirectional" and rows["single", 1]["order"] == "translation"
    for row in rows.values():
        assert row["sentences"] == 8 and row["tokens_per_s"] == row["output_tokens"] / row["total_s"]
        # --baseline-of again=pairs: that system against pairs, the others against the first system
        base = rows["pairs" if row["system"] == "again" else "single", row["beam"]]
        assert row["baseline"] == base["system"] and row["bleu_delta"] == row["bleu"] - base["bleu"]
        assert row["tokens_per_s_ratio"] == pytest.approx(row["tokens_per_s"] / base["tokens_per_s"])
        # the systems took turns in 8 rounds of one sentence; the range is that of the rounds' ratios
        assert len(row["round_s"]) == 8 and sum(row["round_tokens"]) == row["output_tokens"]
        ratios = [(t / s) / (bt / bs) for t, s, bt, bs in zip(row["round_tokens"], row["round_s"],
                                                               base["round_tokens"], base["round_s"]) if bt]
        assert row["tokens_per_s_ratio_rounds"] == pytest.approx([min(ratios), max(ratios)])
    assert rows["single", 1]["tokens_per_s_ratio"] == 1.0 and rows["single", 1]["bleu_delta"] == 0.0
    assert rows["again", 1]["bleu_delta"] == 0.0  # the same model as its baseline
    assert "(again: vs `pairs`)" in (out / "s.md").read_text()
    # two tokens per step: about half the steps of the natural length + EOD
    assert rows["pairs", 1]["tokens_per_iteration"] > 1.5
    greedy = run_cli("fairseq-generate", reverse_data, *TASK, "--path", bidirectional_checkpoint, "--cpu",
                     "--beam", "1", "--batch-size", "1").stdout
    texts = {sid: h[0][1] for sid, h in hypotheses(greedy).items()}
    assert rows["pairs", 1]["output_tokens"] == sum(len(texts[i].split()) for i in rows["pairs", 1]["ids"])
    assert "| pairs | bidirectional | 2 |" in (out / "s.md").read_text() and (out / "s.png").stat().st_size > 0
    # --nbest W: W finished hypotheses
    wide = systems.main([str(reverse_data), "--system", f"pairs={bidirectional_checkpoint}", "--beams", "2",
                         "--max-sentences", "8", "--warmup", "0", "--no-progress-bar", "--nbest-equal-beam"])
    assert wide["rows"][0]["nbest"] == 2 and rows["pairs", 2]["nbest"] == 1
    assert wide["rows"][0]["mean_iterations"] >= rows["pairs", 2]["mean_iterations"]
    # the default stopping rule (--pair-beam-stop beam) finishes W too; the paper's K = 1 stops earlier
    assert result["settings"]["pair_beam_stop"] == "beam" and "--pair-beam-stop beam" in (out / "s.md").read_text()
    assert result["settings"]["packed_linears"] == "auto" and "--packed-linears auto" in (out / "s.md").read_text()
    assert rows["pairs", 2]["mean_iterations"] == wide["rows"][0]["mean_iterations"]
    first = systems.main([str(reverse_data), "--system", f"pairs={bidirectional_checkpoint}", "--beams", "2",
                          "--max-sentences", "8", "--warmup", "0", "--no-progress-bar", "--pair-beam-stop", "nbest",
                          "--out-md", str(out / "stop.md")])
    assert first["settings"]["pair_beam_stop"] == "nbest" and "the paper's K = 1" in (out / "stop.md").read_text()
    assert first["rows"][0]["mean_iterations"] <= rows["pairs", 2]["mean_iterations"]


def test_systems_config_copied_for_another_checkpoint_is_that_checkpoints_config(reverse_data, tmp_path):
    """bench.systems parses fairseq's config once per task and task options and copies it for each checkpoint:
    the copy equals, field by field, the config parsed for that checkpoint; the parsed one is left as it was."""
    from omegaconf import OmegaConf

    from fairseq_plugins.bench import fairseq_engine

    def parsed(path):
        return fairseq_engine.fairseq_config(str(reverse_data), str(path), "test", "cpu", False, "none",
                                             ["--target-order", "single_l2r", "--beam", "2", "--max-len-b", "30"],
                                             task="double_token_translation")

    first, other = tmp_path / "first.pt", tmp_path / "other.pt"
    cfg = parsed(first)
    copied = fairseq_engine.config_for_path(cfg, str(other))
    assert OmegaConf.to_container(copied) == OmegaConf.to_container(parsed(other))
    assert cfg.common_eval.path == str(first) and copied.common_eval.path == str(other)
    copied.generation.nbest = 2  # what bench.systems sets per beam
    assert cfg.generation.nbest == 1


def test_systems_benchmark_bad_input(reverse_data, tiny_checkpoint, tmp_path):
    from fairseq_plugins.bench import systems

    with pytest.raises(PluginError, match="--system: expected NAME=CHECKPOINT"):
        systems.parse_args([str(reverse_data), "--system", str(tiny_checkpoint)])
    with pytest.raises(PluginError) as error:
        systems.parse_args([str(reverse_data), "--system", f"a={tmp_path / 'missing.pt'}", "--baseline", "b",
                            "--beams", "0"])
    assert "no such file" in str(error.value) and "--baseline 'b'" in str(error.value)
    assert "--beams must be positive" in str(error.value)
    with pytest.raises(PluginError, match="--baseline-of: expected NAME=BASELINE, got 'a'"):
        systems.parse_args([str(reverse_data), "--system", f"a={tiny_checkpoint}", "--baseline-of", "a"])
    with pytest.raises(PluginError) as error:
        systems.parse_args([str(reverse_data), "--system", f"a={tiny_checkpoint}", "--baseline-of", "b=c"])
    assert "--baseline-of b=c: 'b' is not a --system name (a)" in str(error.value)
    assert "--baseline-of b=c: 'c' is not a --system name (a)" in str(error.value)


# every training's valid BLEU (CONVERGE=1) decodes at most 1.2 x source + 10 tokens (the recipes' MAX_LEN), not
# fairseq's 200 a sentence that a 2-epoch model decodes until it stops
SHORT_VALID_BLEU = ["--eval-bleu-args", '{"beam": 1, "max_len_a": 1.2, "max_len_b": 10}']


def compare_distilled(env, timeout=900):
    """recipes/double-token/compare-distilled-multi30k.sh in DRY_RUN with ``env`` added and SHORT_VALID_BLEU passed
    to every training; its log (stdout+stderr)."""
    import os
    import subprocess

    from conftest import BIN_DIR, REPO

    env = {**os.environ, "DRY_RUN": "1", "SRC": "src", "TGT": "tgt", "REMOVE_BPE": "none",
           "PATH": os.pathsep.join([str(BIN_DIR), os.environ["PATH"]]), **{k: str(v) for k, v in env.items()}}
    proc = subprocess.run(["bash", str(REPO / "recipes" / "double-token" / "compare-distilled-multi30k.sh"),
                           *SHORT_VALID_BLEU],
                          env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-4000:]
    return proc.stdout


def cpu_autocast():
    """AUTOCAST for the recipes' trainings: bf16 where this CPU has it, else off."""
    from fairseq_plugins.training.cpu_autocast import bf16_supported

    return "bf16" if bf16_supported() else "off"


@pytest.fixture(scope="module")
def distilled_comparison(reverse_data, tmp_path_factory):
    """The comparison with PARALLEL=1, WARM_START=1 and AUTOCAST (passed on to every training), run twice into the
    same RUNS: (RUNS/multi30k, the rerun's log). The original pair it trains is also the one of
    test_distilled_comparison_recipe_with_a_given_teacher and test_multi30k_recipe_converge_dry_run."""
    runs = tmp_path_factory.mktemp("compare_distilled")
    env = {"PARALLEL": "1", "WARM_START": "1", "DATA": reverse_data, "RAW": reverse_data.parent / "raw",
           "RUNS": runs, "POLL_SECONDS": "1", "AUTOCAST": cpu_autocast()}
    compare_distilled(env)
    return runs / "multi30k", compare_distilled(env)


def test_distilled_comparison_recipe_dry_run(reverse_data, distilled_comparison):
    """recipes/double-token/compare-distilled-multi30k.sh (DRY_RUN, PARALLEL=1: a pipeline per order): the pair
    to convergence, the single-token model's distillation of the training set (the bidirectional pipeline waits
    for it), the pair on it, with WARM_START=1 the bidirectional model on it started from the single-token one,
    the five systems in one table (the distilled ones against their own baseline) and one plot; a rerun skips
    every stage."""
    import json

    runs, rerun = distilled_comparison
    for root in ("double-token", "double-token-distilled"):
        for order in ("bidirectional", "single_l2r"):
            assert (runs / root / order / "training.done").exists()
            assert (runs / root / order / "checkpoint_avg_best.pt").exists()
    distilled = runs / "distilled-single-beam5"
    targets = (distilled / "text" / "train.tgt").read_text().splitlines()
    references = (reverse_data.parent / "raw" / "train.tgt").read_text().splitlines()
    assert len(targets) == len(references) == 600 and targets != references  # the teacher's, not the references
    # the distilled pair trained on the distillation (train-multi30k.sh's TRAIN_DATA), validated on the references
    data = runs / "double-token-distilled" / "data"
    for name in ("train.src-tgt.tgt.bin", "valid.src-tgt.tgt.bin", "dict.tgt.txt"):
        source = distilled / "bin" if name.startswith("train.") else reverse_data
        assert (data / name).resolve() == (source / name).resolve(), name
    for order in ("bidirectional", "single_l2r"):
        log = (runs / "double-token-distilled" / order / "train.log").read_text()
        assert f"{data} train src-tgt 600 examples" in log, log[-4000:]
        assert (runs / "double-token-distilled" / order / "checkpoint2.pt").exists()
    result = json.loads((runs / "double-token-comparison" / "results.json").read_text())
    assert {(r["system"], r["baseline"]) for r in result["rows"]} == {
        ("single_l2r", "single_l2r"), ("bidirectional", "single_l2r"),
        ("single_l2r_distilled", "single_l2r"), ("bidirectional_distilled", "single_l2r_distilled"),
        ("bidirectional_warm", "single_l2r_distilled")}
    warm = runs / "double-token-distilled-warm" / "bidirectional"
    start = runs / "double-token-distilled" / "single_l2r" / "checkpoint_avg_best.pt"
    assert f"loading pretrained model from {start}" in (warm / "train.log").read_text()
    assert (warm / "checkpoint_avg_best.pt").exists()
    assert (runs / "double-token-comparison" / "bleu-curves.png").stat().st_size > 0
    assert "fairseq_cli.train" not in rerun, rerun[-4000:]
    for order in ("bidirectional", "single_l2r"):
        log = (runs / "double-token-comparison" / f"pipeline-{order}.log").read_text()
        assert log.count("trained already") == 2 and "fairseq_cli.train" not in log, log[-4000:]
    assert "distilled already" in (runs / "double-token-comparison" / "pipeline-single_l2r.log").read_text()


def test_distilled_comparison_recipe_with_a_given_teacher(reverse_data, tiny_checkpoint, distilled_comparison,
                                                          tmp_path):
    """TEACHER=<checkpoint> (e.g. the SpecDec verifier): that model's translations are the
    distillation, made before any training, and both systems train on them first and on the original data
    after (the recipe's default, one training after the other); the four systems still end in one table.
    ORIGINAL_ROOT is the pair test_distilled_comparison_recipe_dry_run trained on the original data (skipped
    here as trained already); everything else goes under this test's RUNS."""
    import json

    original = distilled_comparison[0] / "double-token"
    log = compare_distilled({"PARALLEL": "0", "DATA": reverse_data, "RAW": reverse_data.parent / "raw",
                             "RUNS": tmp_path, "TEACHER": tiny_checkpoint, "ORIGINAL_ROOT": original})
    runs = tmp_path / "multi30k"
    distilled = runs / f"distilled-{tiny_checkpoint.stem}-beam5"
    targets = (distilled / "text" / "train.tgt").read_text().splitlines()
    references = (reverse_data.parent / "raw" / "train.tgt").read_text().splitlines()
    assert len(targets) == len(references) == 600 and targets != references
    assert not (runs / "distilled-single-beam5").exists()
    out = runs / f"double-token-comparison-{tiny_checkpoint.stem}-beam5"
    trainings = [log.index(f"{order} on the {kind} data")
                 for kind in ("distilled", "original") for order in ("bidirectional", "single_l2r")]
    assert log.index("distilling") < trainings[0] and trainings == sorted(trainings), log[-4000:]
    assert log.count("trained already") == 2 and log.index("trained already") > trainings[2], log[-4000:]
    for order in ("bidirectional", "single_l2r"):
        assert (runs / f"double-token-distilled-{tiny_checkpoint.stem}-beam5" / order / "checkpoint_avg_best.pt").exists()
        assert (original / order / "checkpoint_avg_best.pt").exists()
    assert not (runs / "double-token-distilled").exists() and not (runs / "double-token").exists()
    result = json.loads((out / "results.json").read_text())
    assert len(result["rows"]) == 8
    assert not (runs / "double-token-comparison").exists()


def test_distilled_comparison_recipe_pair_only(reverse_data, distilled_comparison, tmp_path):
    """PAIR_ONLY=1 (what recipes/double-token/ship.sh needs): the single-token model, its distillation, the
    single-token model on it and the bidirectional model started from that one, in that order; no bidirectional
    model from scratch, no comparison. On the fixture's trained systems and distillation, every stage is skipped."""
    runs = distilled_comparison[0]
    log = compare_distilled({"PAIR_ONLY": "1", "DATA": reverse_data, "RAW": reverse_data.parent / "raw",
                             "RUNS": tmp_path, "ORIGINAL_ROOT": runs / "double-token",
                             "DISTILLED": runs / "distilled-single-beam5",
                             "DISTILLED_ROOT": runs / "double-token-distilled"})
    stages = ["single_l2r on the original data", "distilled already", "single_l2r on the distilled data",
              "bidirectional on the distilled data, started from"]
    assert [log.index(stage) for stage in stages] == sorted(log.index(stage) for stage in stages), log[-4000:]
    assert log.count("trained already") == 3 and "fairseq_cli.train" not in log, log[-4000:]
    assert "bidirectional on the original data" not in log and "side by side" not in log, log[-4000:]
    assert not (tmp_path / "multi30k" / "double-token-comparison").exists()


def test_distilled_comparison_recipe_rejects_a_missing_teacher(reverse_data, tmp_path):
    """A TEACHER that does not exist is refused in one line before anything trains."""
    import os
    import subprocess

    from conftest import REPO

    env = {**os.environ, "DRY_RUN": "1", "DATA": str(reverse_data), "RAW": str(reverse_data.parent / "raw"),
           "SRC": "src", "TGT": "tgt", "REMOVE_BPE": "none", "RUNS": str(tmp_path),
           "TEACHER": str(tmp_path / "no-such.pt")}
    proc = subprocess.run(["bash", str(REPO / "recipes" / "double-token" / "compare-distilled-multi30k.sh")],
                          env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    assert proc.returncode != 0 and "no-such.pt" in proc.stdout
    assert not (tmp_path / "multi30k" / "double-token").exists()


def test_multi30k_recipe_trains_on_after_a_stop_by_time(reverse_data, tmp_path):
    """A run stopped by --stop-time-hours is not marked done: the same command resumes it and
    trains to its end (a time budget splits a training into several runs; it does not finish it)."""
    import os
    import subprocess

    from conftest import BIN_DIR, REPO

    env = {**os.environ, "DRY_RUN": "1", "DATA": str(reverse_data), "SRC": "src", "TGT": "tgt",
           "REMOVE_BPE": "none", "ORDERS": "bidirectional", "SAVE_ROOT": str(tmp_path),
           "PATH": os.pathsep.join([str(BIN_DIR), os.environ["PATH"]])}
    script = str(REPO / "recipes" / "double-token" / "train-multi30k.sh")
    run = lambda *extra: subprocess.run(["bash", script, *extra], env=env, text=True,  # noqa: E731
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    stopped = run("--stop-time-hours", "0.000001")
    assert stopped.returncode == 0, stopped.stdout[-4000:]
    assert "stopped by --stop-time-hours, not finished" in stopped.stdout
    assert (tmp_path / "bidirectional" / "checkpoint_last.pt").exists()
    assert not (tmp_path / "bidirectional" / "training.done").exists()
    assert not (tmp_path / "bidirectional" / "checkpoint2.pt").exists()
    resumed = run()
    assert resumed.returncode == 0, resumed.stdout[-4000:]
    assert "Loaded checkpoint" in resumed.stdout and "trained already" not in resumed.stdout
    assert (tmp_path / "bidirectional" / "checkpoint2.pt").exists()
    assert (tmp_path / "bidirectional" / "training.done").exists()


def test_multi30k_recipe_converge_dry_run(reverse_data, distilled_comparison, tmp_path):
    """CONVERGE=1 EVALUATE=1 on the pair test_distilled_comparison_recipe_dry_run trained with this script
    (CONVERGE=1, DRY_RUN: tiny model, 2 epochs, BLEU on valid every epoch, the best checkpoints kept), copied here
    without its averages: the trained orders are skipped, their best checkpoints averaged, the averaged models
    evaluated side by side, valid BLEU curves plotted."""
    import os
    import shutil
    import subprocess

    from conftest import BIN_DIR, REPO

    for order in ("bidirectional", "single_l2r"):
        shutil.copytree(distilled_comparison[0] / "double-token" / order, tmp_path / order)
        (tmp_path / order / "checkpoint_avg_best.pt").unlink()
    env = {**os.environ, "DRY_RUN": "1", "CONVERGE": "1", "DATA": str(reverse_data), "SRC": "src", "TGT": "tgt",
           "REMOVE_BPE": "none", "EVALUATE": "1", "ORDERS": "bidirectional single_l2r", "SAVE_ROOT": str(tmp_path),
           "PATH": os.pathsep.join([str(BIN_DIR), os.environ["PATH"]])}
    script = str(REPO / "recipes" / "double-token" / "train-multi30k.sh")
    refused = subprocess.run(["bash", script], env={**env, "AUTOCAST": "fp8"}, text=True, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, timeout=600)
    assert refused.returncode != 0 and "AUTOCAST must be off|bf16" in refused.stdout
    proc = subprocess.run(["bash", script], env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert proc.stdout.count("trained already") == 2 and "fairseq_cli.train" not in proc.stdout, proc.stdout[-4000:]
    for order in ("bidirectional", "single_l2r"):
        # trained with the fixture's AUTOCAST (compare-distilled-multi30k.sh passes it on)
        assert f"'cpu_autocast': {cpu_autocast()}" in (tmp_path / order / "train.log").read_text()
        assert len(list((tmp_path / order).glob("checkpoint.best_bleu_*.pt"))) == 2  # AVERAGE_BEST in a dry run
        assert (tmp_path / order / "checkpoint_avg_best.pt").exists()
        assert re.search(rf"^{order}: epoch 1 \(\d+ updates\) [\d.]+, epoch 2 ", proc.stdout, re.M), proc.stdout[-3000:]
    assert (tmp_path / "bleu-curves.png").read_bytes()[:4] == b"\x89PNG"
    assert "checkpoint_avg_best.pt" in (tmp_path / "results.json").read_text()
    table = (tmp_path / "results.md").read_text()
    assert re.findall(r"^\| (\w+) \| (\w+) \| (\d) \|", table, re.M) == [
        ("bidirectional", "bidirectional", "1"), ("bidirectional", "bidirectional", "2"),
        ("single_l2r", "single_l2r", "1"), ("single_l2r", "single_l2r", "2")]
    assert "vs `single_l2r` at the same beam" in table and "warm-up 1 sentences" in table


def test_multi30k_recipe_train_data_with_another_dictionary_is_refused(reverse_data, tmp_path):
    """TRAIN_DATA (e.g. a distillation) replaces DATA's train split only, so it must share DATA's dictionaries:
    another one is refused in one line, before any training. (Training on a TRAIN_DATA:
    test_distilled_comparison_recipe_dry_run.)"""
    import os
    import shutil
    import subprocess

    from conftest import BIN_DIR, REPO

    distilled = tmp_path / "distilled"
    shutil.copytree(reverse_data, distilled)
    with open(distilled / "dict.tgt.txt", "a") as extra:
        extra.write("newword 1\n")
    env = {**os.environ, "DRY_RUN": "1", "DATA": str(reverse_data), "TRAIN_DATA": str(distilled), "SRC": "src",
           "TGT": "tgt", "REMOVE_BPE": "none", "ORDERS": "bidirectional", "SAVE_ROOT": str(tmp_path / "runs"),
           "PATH": os.pathsep.join([str(BIN_DIR), os.environ["PATH"]])}
    refused = subprocess.run(["bash", str(REPO / "recipes" / "double-token" / "train-multi30k.sh")], env=env,
                             text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    assert refused.returncode != 0 and "dict.tgt.txt differs from DATA's" in refused.stdout
    assert not (tmp_path / "runs" / "bidirectional").exists()
