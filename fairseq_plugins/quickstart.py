"""Quickstart: a small verifier + drafter pair, SpecDec vs greedy on a few sentences.

    python -m fairseq_plugins.quickstart [--workdir DIR]
    python -m fairseq_plugins.quickstart --model gec [--gec-dir DIR] [--input FILE]

Uses the demo Multi30k pair in ``checkpoints/demo/`` when it is there; otherwise it
makes a synthetic corpus, trains a tiny verifier and a block drafter with the stock
console scripts (a few minutes on a laptop CPU), then translates with
``--decoding specdec`` and with greedy search, and prints both with the speedup and
whether the outputs are identical.

``--model gec`` corrects learner sentences with the shipped grammatical error correction
model (``checkpoints/gec/``, made by ``recipes/gec/ship.sh``) and ``--decoding iad``, whose
drafts are copies of the input, against the same two greedy searches.
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
# the shipped GEC model (docs/gec.md): one or more NAME.pt beside these files, looked for as the demo pair is
GEC_FILES = ("sentencepiece.model", "dict.src.txt", "dict.tgt.txt", "sentences.txt")
GEC_DIRS = (PLUGIN_DIR.parent / "checkpoints" / "gec", Path(sys.prefix) / "share" / "fairseq-specdec" / "gec")
MAKE_GEC = "train one (docs/gec.md), then `bash recipes/gec/ship.sh`"
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
    folder = find_demo(demo_dir)
    if folder is None:
        return None
    what = f"demo pair {folder}"
    files = required_files(folder, DEMO_FILES, what, "checkpoints/README.md")
    weights = read_weights(files["verifier.pt"], what)
    read_weights(files["drafter.pt"], what)
    check_dictionaries(what, files, "verifier.pt", weights, ("dict.en.txt", "dict.de.txt"), "checkpoints/README.md")
    print(f"using the Multi30k en->de demo pair in {folder}")
    options = dict(source_lang="en", target_lang="de", sentencepiece_model=str(files["sentencepiece.model"]))
    return folder, files["verifier.pt"], files["drafter.pt"], read_sentences(files["sentences.en"]), options


def gec_model(gec_dir=None, checkpoint=None):
    """The shipped GEC model (docs/gec.md): (folder, checkpoint, None, sentences, options), as ``demo_pair``.
    ``checkpoint``: the name of one of the folder's ``*.pt`` (default: the first by name).  No folder, no
    model in it or a missing or unreadable file is an error in one line that says how to make one."""
    from fairseq_plugins_compat.errors import PluginError

    folder = Path(gec_dir) if gec_dir is not None else next((d for d in GEC_DIRS if d.is_dir()), None)
    if folder is None or not folder.is_dir():
        looked = folder or " or ".join(map(str, GEC_DIRS))
        raise PluginError(f"no GEC model in {looked}: {MAKE_GEC}")
    models = sorted(path.name for path in folder.glob("*.pt"))
    if not models or (checkpoint is not None and checkpoint not in models):
        found = f"only {', '.join(models)}" if models else "no *.pt"
        raise PluginError(f"GEC model {folder}: {checkpoint or 'a model'} is missing ({found}): {MAKE_GEC}")
    name = checkpoint or models[0]
    what = f"GEC model {folder}"
    files = required_files(folder, (name, *GEC_FILES), what, "docs/gec.md")
    check_dictionaries(what, files, name, read_weights(files[name], what), ("dict.src.txt", "dict.tgt.txt"),
                       "docs/gec.md")
    print(f"using the GEC model {files[name]}")
    options = dict(source_lang="src", target_lang="tgt", sentencepiece_model=str(files["sentencepiece.model"]))
    return folder, files[name], None, read_sentences(files["sentences.txt"]), options


def required_files(folder: Path, names, what, doc):
    """{name: path} of the files ``names`` of ``folder``; a PluginError names the first missing or empty one
    (``what``: the folder in words; ``doc``: where to read about it)."""
    from fairseq_plugins_compat.errors import PluginError

    files = {name: folder / name for name in names}
    for name, path in files.items():
        if not path.is_file() or path.stat().st_size == 0:
            raise PluginError(f"{what}: {name} is missing or empty (see {doc})")
    return files


def read_weights(path: Path, what):
    """The state dict of the checkpoint ``path``; a PluginError naming it when it cannot be read."""
    from fairseq_plugins_compat.checkpoint_loading import CheckpointError, load_checkpoint_file
    from fairseq_plugins_compat.errors import PluginError

    try:
        return load_checkpoint_file(str(path))["model"]
    except CheckpointError as error:
        raise PluginError(f"{what}: {path.name} is not a readable checkpoint: {error}") from None


def read_sentences(path: Path):
    """The non-blank lines of ``path``."""
    return [line for line in path.read_text().splitlines() if line.strip()]


def check_dictionaries(what, files, model_name, weights, names, doc):
    """Each dictionary of ``names`` (source, target) must parse and hold as many entries as the model's
    embeddings have rows (``weights``: the state dict of ``files[model_name]``); else a PluginError naming
    the file."""
    from fairseq.data import Dictionary

    from fairseq_plugins_compat.errors import PluginError

    for name, side in zip(names, ("encoder", "decoder")):
        try:
            size = len(Dictionary.load(str(files[name])))
        except ValueError as error:
            reason = " ".join(str(error).split())
            raise PluginError(f"{what}: {name} is not a fairseq dictionary: {reason}") from None
        rows = weights[f"{side}.embed_tokens.weight"].size(0)
        if size != rows:
            raise PluginError(f"{what}: {name} has {size} entries, {model_name}'s {side} embeddings {rows} "
                              f"(see {doc})")


def reuse_instructions(data, verifier, drafter, options, workdir=None, decoding="specdec"):
    """Where the models are, and the commands that use them again (lines to print); ``drafter`` None: a
    ``decoding`` without one (iad)."""
    spm = options.get("sentencepiece_model")
    bpe = f" --bpe sentencepiece --sentencepiece-model {Path(spm).resolve()}" if spm else ""
    lines = [f"models: verifier {Path(verifier).resolve()}"]
    if drafter is not None:
        lines.append(f"        drafter  {Path(drafter).resolve()}")
    lines.append(f"        data (dictionaries) {Path(data).resolve()}")
    if workdir is not None:
        lines.append(f"run again with --workdir {workdir} (or QUICKSTART_DIR={workdir} bash quickstart.sh) "
                     f"to reuse them without training")
    drafting = f" --drafter-path {Path(drafter).resolve()}" if drafter is not None else ""
    lines += ["translate with them:",
              f"  fairseq-interactive {Path(data).resolve()} --user-dir fairseq_plugins --task speculative_translation "
              f"--source-lang {options['source_lang']} --target-lang {options['target_lang']}{bpe} "
              f"--path {Path(verifier).resolve()} --decoding {decoding}{drafting}"]
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


def compare(data, verifier, drafter, sentences, options, decoding, threads, shown=None):
    """Times stock fairseq greedy (beam 1), the plugin's greedy and ``decoding`` (with ``drafter``, if any) on
    ``sentences`` one by one; prints the first ``shown`` outputs of ``decoding`` (None: all), the timings, the
    speedups, tokens per iteration and how many outputs equal stock greedy's.  True when all of them do."""
    from fairseq_plugins.api import Translator

    common = dict(max_len_a=1.2, max_len_b=10, **options)
    stock = Translator.load(str(verifier), str(data), decoding="beam", beam=1, **common)
    greedy = Translator.load(str(verifier), str(data), decoding="greedy", **common)
    fast = Translator.load(str(verifier), str(data), drafter=drafter and str(drafter), decoding=decoding, **common)
    stock_out, stock_time = timed_translate(stock, sentences)
    greedy_out, greedy_time = timed_translate(greedy, sentences)
    fast_out, fast_time = timed_translate(fast, sentences)
    for source, output in list(zip(sentences, fast_out))[:shown]:
        print(f"\nS: {source}\nH: {output}")
    identical = sum(a == b for a, b in zip(stock_out, fast_out))
    stats = getattr(fast.generator, "stats", None)
    before = (stats.undrafted, stats.loop_iterations) if stats is not None else (0, 0)
    hypotheses = fast.translate_tokens(sentences)  # one more pass: its iterations are the ones reported
    steps, tokens = [h["steps"] for h in hypotheses], [len(h["tokens"]) for h in hypotheses]
    print(f"\n{len(sentences)} sentences, batch 1, {threads} thread(s), {platform.processor() or platform.machine()}:")
    print(f"  stock fairseq greedy {stock_time:.2f}s   greedy (the plugin's, no drafter) {greedy_time:.2f}s   "
          f"{decoding} {fast_time:.2f}s")
    print(f"  {decoding}: {stock_time / fast_time:.2f}x stock fairseq greedy, {greedy_time / fast_time:.2f}x the "
          f"plugin's greedy; {sum(tokens) / sum(steps):.2f} tokens per iteration (greedy: 1.00)")
    undrafted, iterations = (stats.undrafted - before[0], stats.loop_iterations - before[1]) \
        if stats is not None else (0, 0)
    if undrafted:  # --draft-length measured skipped drafting where it did not pay
        drafting = "the drafter was skipped" if drafter is not None else "no copy of the input was drafted"
        print(f"  {drafting} in {undrafted} of {iterations} iterations (--draft-length "
              f"measured times not drafting now and then, and skips drafting where that is faster)")
    same_greedy = sum(a == b for a, b in zip(stock_out, greedy_out))
    print(f"  output identical to stock greedy: {decoding} {identical}/{len(sentences)}, "
          f"greedy {same_greedy}/{len(sentences)}\n")
    return identical == same_greedy == len(sentences)


def main(argv=None):
    from fairseq_plugins_compat.errors import PluginError

    parser = argparse.ArgumentParser(prog="python -m fairseq_plugins.quickstart", description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("demo", "gec"), default="demo",
                        help="demo (default): the Multi30k en->de pair (or a toy pair) and --decoding specdec; "
                             "gec: the shipped grammatical error correction model and --decoding iad")
    parser.add_argument("--workdir", default=os.environ.get("QUICKSTART_DIR", "quickstart-work"),
                        help="where the synthetic data and tiny models go (default: ./quickstart-work)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads for the timing (default 1)")
    parser.add_argument("--demo-dir", help="the demo pair's folder (default: checkpoints/demo of the checkout, "
                                           "else the copy installed with the package; none: train the toy pair)")
    parser.add_argument("--gec-dir", help="--model gec: the GEC model's folder (default: checkpoints/gec of the "
                                          "checkout, else the copy installed with the package)")
    parser.add_argument("--checkpoint", help="--model gec: which NAME.pt of that folder (default: the first by name)")
    parser.add_argument("--input", help="sentences to translate or correct, one a line (default: the model's own; "
                                        "GEC input is tokenized as JFLEG: `do n't`, `it 's`)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    workdir = Path(args.workdir).resolve()
    if args.model == "gec":
        shipped, decoding, shown = gec_model(args.gec_dir, args.checkpoint), "iad", None
    else:
        shipped, decoding, shown = demo_pair(args.demo_dir), "specdec", 5
    data, verifier, drafter, sentences, options = shipped or train_pair(workdir)
    if args.input is not None:
        if not Path(args.input).is_file():
            raise PluginError(f"--input {args.input}: no such file")
        sentences = read_sentences(Path(args.input))
        if not sentences:
            raise PluginError(f"--input {args.input}: no sentences in it")
    identical = compare(data, verifier, drafter, sentences, options, decoding, args.threads, shown)
    print("\n".join(reuse_instructions(data, verifier, drafter, options, None if shipped else workdir, decoding)))
    return 0 if identical else 1


def cli_main():
    from fairseq_plugins_compat.errors import exit_on_plugin_error

    sys.exit(exit_on_plugin_error(main, "quickstart"))


if __name__ == "__main__":
    cli_main()
