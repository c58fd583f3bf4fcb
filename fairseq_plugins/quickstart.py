"""Quickstart: a small verifier + drafter pair, SpecDec vs greedy on a few sentences.

    python -m fairseq_plugins.quickstart [--workdir DIR]

Uses the demo Multi30k pair in ``checkpoints/demo/`` when it is there; otherwise it
makes a synthetic corpus, trains a tiny verifier and a block drafter with the stock
console scripts (a few minutes on a laptop CPU), then translates with
``--decoding specdec`` and with greedy search, and prints both with the speedup and
whether the outputs are identical.
"""
import argparse
import os
import platform
import random
import subprocess
import sys
import time
from pathlib import Path

import torch

PLUGIN_DIR = Path(__file__).resolve().parent
DEMO_FILES = ("verifier.pt", "drafter.pt", "sentencepiece.model", "dict.en.txt", "dict.de.txt", "sentences.en")
# where the demo pair is looked for: the checkout (run from a clone, or an editable install), then
# the copy setup.py installs with the package (share/fairseq-specdec/demo)
DEMO_DIRS = (PLUGIN_DIR.parent / "checkpoints" / "demo", Path(sys.prefix) / "share" / "fairseq-specdec" / "demo")
MODEL = ["--encoder-layers", "2", "--decoder-layers", "2", "--encoder-embed-dim", "64", "--decoder-embed-dim", "64",
         "--encoder-ffn-embed-dim", "128", "--decoder-ffn-embed-dim", "128", "--encoder-attention-heads", "4",
         "--decoder-attention-heads", "4", "--share-all-embeddings"]
TRAIN = ["--optimizer", "adam", "--lr", "0.005", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "50",
         "--max-tokens", "4000", "--no-progress-bar", "--log-interval", "100", "--seed", "1", "--cpu",
         "--no-epoch-checkpoints", "--num-workers", "0"]
PLUGIN = ["--user-dir", str(PLUGIN_DIR), "--task", "speculative_translation"]


def run(*cmd):
    print("$", " ".join(map(str, cmd)), flush=True)
    subprocess.run(list(map(str, cmd)), check=True, stdout=subprocess.DEVNULL)


def synthetic_corpus(raw: Path, n_train=4000, seed=0):
    """A toy 'translation' a tiny model learns in a minute: rename each word (w7 -> v7)."""
    rng = random.Random(seed)
    raw.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("valid", 100), ("test", 50)):
        with open(raw / f"{split}.src", "w") as src, open(raw / f"{split}.tgt", "w") as tgt:
            for _ in range(n):
                words = [f"w{rng.randrange(40)}" for _ in range(rng.randint(5, 20))]
                src.write(" ".join(words) + "\n")
                tgt.write(" ".join(w.replace("w", "v") for w in words) + "\n")


def train_pair(workdir: Path):
    """Verifier (stock transformer) then drafter (block_drafter, glancing loss)."""
    raw, data = workdir / "raw", workdir / "bin"
    if not (data / "dict.src.txt").exists():
        synthetic_corpus(raw)
        run("fairseq-preprocess", "--source-lang", "src", "--target-lang", "tgt", "--trainpref", raw / "train",
            "--validpref", raw / "valid", "--testpref", raw / "test", "--destdir", data, "--joined-dictionary",
            "--workers", "1")
    verifier, drafter = workdir / "verifier" / "checkpoint_last.pt", workdir / "drafter" / "checkpoint_last.pt"
    if not verifier.exists():
        run("fairseq-train", data, "--arch", "transformer", *MODEL, *TRAIN, "--max-update", 400,
            "--save-dir", verifier.parent)
    if not drafter.exists():
        run("fairseq-train", data, *PLUGIN, "--arch", "block_drafter_tiny", "--decoder-embed-dim", 64,
            "--decoder-ffn-embed-dim", 128, "--criterion", "glancing_block_loss", "--block-size", 8,
            "--init-from-verifier", verifier, *TRAIN, "--max-update", 400, "--save-dir", drafter.parent)
    sentences = (raw / "test.src").read_text().splitlines()[:20]
    return data, verifier, drafter, sentences, dict(source_lang="src", target_lang="tgt")


def find_demo(demo_dir=None):
    """The demo folder: ``demo_dir`` if given, else the first of ``DEMO_DIRS`` that exists (None if none)."""
    if demo_dir is not None:
        return Path(demo_dir)
    return next((d for d in DEMO_DIRS if d.is_dir()), None)


def demo_pair(demo_dir=None):
    """The Multi30k en->de demo pair (see checkpoints/README.md), or None when there is no demo
    folder.  A folder with a missing or unreadable file is an error naming the file (the toy pair
    is trained only when the folder is absent)."""
    from fairseq_plugins_compat.checkpoint_loading import CheckpointError, load_checkpoint_file
    from fairseq_plugins_compat.errors import PluginError

    folder = find_demo(demo_dir)
    if folder is None:
        return None
    files = {name: folder / name for name in DEMO_FILES}
    for name, path in files.items():
        if not path.is_file() or path.stat().st_size == 0:
            raise PluginError(f"demo pair {folder}: {name} is missing or empty (see checkpoints/README.md)")
    checkpoints = {}
    for name in ("verifier.pt", "drafter.pt"):
        try:
            checkpoints[name] = load_checkpoint_file(str(files[name]))
        except CheckpointError as error:
            raise PluginError(f"demo pair {folder}: {name} is not a readable checkpoint: {error}") from None
    check_dictionaries(folder, files, checkpoints["verifier.pt"]["model"])
    print(f"using the Multi30k en->de demo pair in {folder}")
    options = dict(source_lang="en", target_lang="de", sentencepiece_model=str(files["sentencepiece.model"]))
    sentences = [line for line in files["sentences.en"].read_text().splitlines() if line.strip()]
    return folder, files["verifier.pt"], files["drafter.pt"], sentences, options


def check_dictionaries(folder: Path, files, weights):
    """Each demo dictionary must parse and hold as many entries as the verifier's embeddings have rows
    (``weights``: its state dict); else a PluginError naming the file."""
    from fairseq.data import Dictionary

    from fairseq_plugins_compat.errors import PluginError

    for name, side in (("dict.en.txt", "encoder"), ("dict.de.txt", "decoder")):
        try:
            size = len(Dictionary.load(str(files[name])))
        except ValueError as error:
            reason = " ".join(str(error).split())
            raise PluginError(f"demo pair {folder}: {name} is not a fairseq dictionary: {reason}") from None
        rows = weights[f"{side}.embed_tokens.weight"].size(0)
        if size != rows:
            raise PluginError(f"demo pair {folder}: {name} has {size} entries, verifier.pt's {side} embeddings "
                              f"{rows} (see checkpoints/README.md)")


def reuse_instructions(data, verifier, drafter, options, workdir=None):
    """Where the models are, and the commands that use them again (lines to print)."""
    spm = options.get("sentencepiece_model")
    bpe = f" --bpe sentencepiece --sentencepiece-model {spm}" if spm else ""
    lines = [f"models: verifier {Path(verifier).resolve()}", f"        drafter  {Path(drafter).resolve()}",
             f"        data (dictionaries) {Path(data).resolve()}"]
    if workdir is not None:
        lines.append(f"run again with --workdir {workdir} (or QUICKSTART_DIR={workdir} bash quickstart.sh) "
                     f"to reuse them without training")
    lines += ["translate with them:",
              f"  fairseq-interactive {Path(data).resolve()} --user-dir fairseq_plugins --task speculative_translation "
              f"--source-lang {options['source_lang']} --target-lang {options['target_lang']}{bpe} "
              f"--path {Path(verifier).resolve()} --decoding specdec --drafter-path {Path(drafter).resolve()}"]
    return lines


def timed_translate(translator, sentences, repeats=3):
    """Outputs and the best of ``repeats`` timings of translating ``sentences`` one by one."""
    translator.translate(sentences[:2])  # warm-up
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        outputs = translator.translate(sentences)
        timings.append(time.perf_counter() - start)
    return outputs, min(timings)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m fairseq_plugins.quickstart", description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=os.environ.get("QUICKSTART_DIR", "quickstart-work"),
                        help="where the synthetic data and tiny models go (default: ./quickstart-work)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads for the timing (default 1)")
    parser.add_argument("--demo-dir", help="the demo pair's folder (default: checkpoints/demo of the checkout, "
                                           "else the copy installed with the package; none: train the toy pair)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    workdir = Path(args.workdir).resolve()
    demo = demo_pair(args.demo_dir)
    data, verifier, drafter, sentences, options = demo or train_pair(workdir)

    from fairseq_plugins.api import Translator

    common = dict(max_len_a=1.2, max_len_b=10, **options)
    stock = Translator.load(str(verifier), str(data), decoding="beam", beam=1, **common)
    greedy = Translator.load(str(verifier), str(data), decoding="greedy", **common)
    specdec = Translator.load(str(verifier), str(data), drafter=str(drafter), decoding="specdec", **common)
    stock_out, stock_time = timed_translate(stock, sentences)
    greedy_out, greedy_time = timed_translate(greedy, sentences)
    spec_out, spec_time = timed_translate(specdec, sentences)
    for source, output in list(zip(sentences, spec_out))[:5]:
        print(f"\nS: {source}\nH: {output}")
    identical = sum(a == b for a, b in zip(stock_out, spec_out))
    hypotheses = specdec.translate_tokens(sentences)
    steps, tokens = [h["steps"] for h in hypotheses], [len(h["tokens"]) for h in hypotheses]
    print(f"\n{len(sentences)} sentences, batch 1, {args.threads} thread(s), {platform.processor() or platform.machine()}:")
    print(f"  stock fairseq greedy {stock_time:.2f}s   greedy (the plugin's, no drafter) {greedy_time:.2f}s   "
          f"specdec {spec_time:.2f}s")
    print(f"  specdec: {stock_time / spec_time:.2f}x stock fairseq greedy, {greedy_time / spec_time:.2f}x the plugin's "
          f"greedy; {sum(tokens) / sum(steps):.2f} tokens per iteration (greedy: 1.00)")
    stats = getattr(specdec.generator, "stats", None)
    if stats is not None and stats.undrafted:  # --draft-length measured skipped the drafter where it did not pay
        print(f"  the drafter was skipped in {stats.undrafted} of {stats.loop_iterations} iterations (--draft-length "
              f"measured times not drafting now and then, and skips the drafter where that is faster)")
    same_greedy = sum(a == b for a, b in zip(stock_out, greedy_out))
    print(f"  output identical to stock greedy: specdec {identical}/{len(sentences)}, "
          f"greedy {same_greedy}/{len(sentences)}\n")
    print("\n".join(reuse_instructions(data, verifier, drafter, options, None if demo else workdir)))
    return 0 if identical == same_greedy == len(sentences) else 1


def cli_main():
    from fairseq_plugins_compat.errors import exit_on_plugin_error

    sys.exit(exit_on_plugin_error(main, "quickstart"))


if __name__ == "__main__":
    cli_main()
