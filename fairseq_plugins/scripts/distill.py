"""Sequence-level knowledge distillation (Kim & Rush 2016; SpecDec 3.1/3.2): translate the
training sources with a teacher (beam 5) into a distilled target file.

    python -m fairseq_plugins.scripts.distill --teacher teacher.pt --input train.en \\
        --output train.distilled.de --reference train.de --num-shards 4

* Input and output are preprocessed text (tokenized/BPE'd, one sentence per line), as
  fairseq-preprocess reads it; the output has exactly as many lines as the input, in
  input order, ready to be binarized with the verifier's dictionary (recipes/distill.sh).
* The input is cut into chunks of ``--chunk-size`` lines; shard i of N translates chunks
  c with c % N == i and writes each one atomically to ``--work-dir``.  A killed run is
  resumed by running the same command again: finished chunks are kept, unfinished ones
  are redone, so no line is lost or duplicated.  Shards run as local processes (one GPU
  each when CUDA is used), or one per machine with ``--shard-id`` and then ``--merge-only``.
* Lines the teacher cannot translate -- empty sources, sources longer than
  ``--max-source-len`` -- and empty translations get the ``--reference`` line (or stay
  empty without one) and are listed in ``OUTPUT.report.tsv`` and in the summary.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import fairseq_plugins
from fairseq_plugins_compat.errors import PluginError, exit_on_plugin_error

MODULE = "fairseq_plugins.scripts.distill"

MANIFEST_KEYS = ("input", "reference", "lines", "chunk_size", "teacher", "beam", "lenpen", "max_len_a",
                 "max_len_b", "max_source_len")


def get_parser():
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add = parser.add_argument
    add("--teacher", nargs="+", required=True, help="teacher checkpoint(s); several are ensembled")
    add("--input", required=True, help="source side of the training set (preprocessed text)")
    add("--output", required=True, help="distilled target file to write")
    add("--reference", help="original target file: used for lines the teacher cannot translate")
    add("--data", help="directory with the teacher's dictionaries, if not the one saved in the checkpoint")
    add("--user-dir", help="fairseq --user-dir the teacher needs")
    add("--work-dir", help="chunks and logs (default: OUTPUT.work); reuse it to resume")
    add("--num-shards", type=int, default=1, help="parallel worker processes (one GPU each with --device cuda)")
    add("--shard-id", type=int, help="run only this shard in this process (then --merge-only)")
    add("--merge-only", action="store_true", help="only merge finished chunks into OUTPUT")
    add("--chunk-size", type=int, default=1000, help="lines per chunk (the unit of resumption)")
    add("--beam", type=int, default=5, help="beam size")
    add("--lenpen", type=float, default=1.0, help="length penalty")
    add("--max-len-a", type=float, default=1.2, help="max target length = a * source length + b")
    add("--max-len-b", type=int, default=10, help="max target length = a * source length + b")
    add("--max-source-len", type=int, help="longer sources (tokens incl. eos) are not translated "
                                           "(default: the teacher's max source positions)")
    add("--max-tokens", type=int, default=4096, help="source tokens per batch")
    add("--batch-size", type=int, default=128, help="sentences per batch")
    add("--device", choices=["auto", "cpu", "cuda"], default="auto", help="where the teacher runs")
    add("--fp16", action="store_true", help="half precision on GPU")
    add("--keep-work-dir", action="store_true", help="keep the chunks after a successful merge")
    add("--no-progress-bar", action="store_true", help="no tqdm bar")
    return parser


# -- chunks on disk ---------------------------------------------------------------------------

def count_lines(path):
    """Lines as fairseq-preprocess counts them (text mode, universal newlines)."""
    with open(path, encoding="utf-8") as f:
        return sum(1 for _ in f)


def chunk_bounds(n_lines, chunk_size):
    """[(start, end)] of every chunk, end exclusive."""
    return [(start, min(start + chunk_size, n_lines)) for start in range(0, n_lines, chunk_size)]


def chunk_path(work_dir, index, suffix="txt"):
    return os.path.join(work_dir, f"chunk-{index:08d}.{suffix}")


def is_done(work_dir, index):
    return os.path.exists(chunk_path(work_dir, index))


def write_atomically(path, lines):
    """Write ``lines`` (no newlines inside) to ``path`` via a temp file and rename."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def prepare_work_dir(args, n_lines):
    """Create the work dir, or check that an existing one was made with the same settings."""
    os.makedirs(args.work_dir, exist_ok=True)
    manifest = {key: getattr(args, key) for key in MANIFEST_KEYS if key != "lines"}
    manifest.update(lines=n_lines, input=os.path.abspath(args.input),
                    teacher=[os.path.abspath(p) for p in args.teacher],
                    reference=os.path.abspath(args.reference) if args.reference else None)
    path = os.path.join(args.work_dir, "manifest.json")
    if os.path.exists(path):
        with open(path) as f:
            previous = json.load(f)
        changed = [key for key in MANIFEST_KEYS if previous.get(key) != manifest[key]]
        if changed:
            raise PluginError(f"{args.work_dir} holds chunks made with other settings ({', '.join(changed)}); "
                              f"rerun with those settings to resume, or use a fresh --work-dir")
    else:
        write_atomically(path, [json.dumps(manifest, indent=1)])


def read_chunks(args, bounds, wanted):
    """Yield (index, source lines, reference lines or None) for the chunk indices in
    ``wanted``, reading the input (and reference) once."""
    ref = open(args.reference, encoding="utf-8") if args.reference else None
    try:
        with open(args.input, encoding="utf-8") as src:
            for index, (start, end) in enumerate(bounds):
                lines = [src.readline().rstrip("\r\n") for _ in range(end - start)]
                refs = [ref.readline().rstrip("\r\n") for _ in range(end - start)] if ref else None
                if index in wanted:
                    yield index, lines, refs
    finally:
        if ref:
            ref.close()


# -- translating ------------------------------------------------------------------------------

class Translator:
    """A fairseq teacher (ensemble) decoding lists of preprocessed lines (:func:`teacher_generator`)."""

    def __init__(self, paths, args):
        import torch
        from fairseq import checkpoint_utils, utils

        import fairseq_plugins_compat  # noqa: F401  (safe checkpoint loading)
        from fairseq_plugins import inference

        if args.user_dir:
            utils.import_user_module(argparse.Namespace(user_dir=args.user_dir))
        overrides = {"data": args.data} if args.data else None
        models, _cfg, self.task = checkpoint_utils.load_model_ensemble_and_task(paths, arg_overrides=overrides)
        use_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
        for model in models:
            model.eval()
            if use_cuda:
                model.cuda()
                if args.fp16:
                    model.half()
        self.models, self.use_cuda, self.args = models, use_cuda, args
        self.src_dict, self.tgt_dict = self.task.source_dictionary, self.task.target_dictionary
        self.max_source_len = inference.max_source_tokens(self.task, models) or sys.maxsize
        self.generator = teacher_generator(self.task, models, args)

    def translate(self, lines):
        """The best hypothesis (preprocessed text) of every line, in input order."""
        from fairseq_plugins import inference

        encoded = [inference.encode(self.src_dict, line) for line in lines]
        best = inference.decode_in_batches(self.task, self.generator, self.models, encoded, self.args.batch_size,
                                           self.args.max_tokens)
        return [self.tgt_dict.string(hypothesis["tokens"].int().cpu()) for hypothesis in best]


def teacher_generator(task, models, args):
    """fairseq's beam search over the teacher(s); at ``--beam 1`` with one teacher on a CPU the plugin's
    ``--decoding greedy`` instead: the same output (up to the float rounding the benchmarks count), in the arithmetic
    of the lean layers that verify a drafter's tokens, and faster (Multi30k sources in the default batches, one
    thread: 1.32x fairseq's beam 1 with the demo verifier over 3,000 lines, 1.14x at Transformer-base size over 600,
    no line different; on a GPU, unmeasured, beam search stays). A teacher it cannot run (a decoder other than
    fairseq's transformer layers, say) keeps beam search, with one line saying why."""
    gen_args = argparse.Namespace(beam=args.beam, lenpen=args.lenpen, max_len_a=args.max_len_a,
                                  max_len_b=args.max_len_b, decoding="beam")
    on_cpu = next(models[0].parameters()).device.type == "cpu"
    if args.beam == 1 and len(models) == 1 and on_cpu:
        from fairseq_plugins.decoding.registry import DECODERS

        greedy = DECODERS["greedy"]
        try:
            return greedy.build(task, models, gen_args, greedy.options())
        except PluginError as error:
            print(f"distill: the teacher decodes with fairseq's beam search ({error})", file=sys.stderr)
    return task.build_generator(models, gen_args)


def translate_chunk(translator, lines, refs, first_line, max_source_len):
    """Return (outputs, report rows) for one chunk; report rows are
    (1-based line number, reason, action) for every line not translated normally."""
    outputs, report, todo = [""] * len(lines), [], []
    for i, line in enumerate(lines):
        n_tokens = len(line.split()) + 1
        if not line.strip():
            report.append((first_line + i + 1, "empty_source", i))
        elif n_tokens > max_source_len:
            report.append((first_line + i + 1, f"too_long({n_tokens}>{max_source_len})", i))
        else:
            todo.append(i)
    for i, hypothesis in zip(todo, translator.translate([lines[i] for i in todo])):
        outputs[i] = hypothesis
        if not hypothesis.strip():
            report.append((first_line + i + 1, "empty_translation", i))
    rows = []
    for number, reason, i in sorted(report):
        action = "reference" if refs is not None else "empty"
        outputs[i] = refs[i] if refs is not None else ""
        rows.append(f"{number}\t{reason}\t{action}")
    return outputs, rows


def run_shard(args, shard_id, num_shards, n_lines, progress=None):
    """Translate every unfinished chunk of this shard."""
    bounds = chunk_bounds(n_lines, args.chunk_size)
    wanted = {c for c in range(len(bounds)) if c % num_shards == shard_id and not is_done(args.work_dir, c)}
    if not wanted:
        return
    translator = Translator(args.teacher, args)
    max_source_len = args.max_source_len or translator.max_source_len
    for index, lines, refs in read_chunks(args, bounds, wanted):
        outputs, report = translate_chunk(translator, lines, refs, bounds[index][0], max_source_len)
        write_atomically(chunk_path(args.work_dir, index, "report.tsv"), report)
        write_atomically(chunk_path(args.work_dir, index), outputs)  # last: marks the chunk done
        if progress is not None:
            progress.update(len(lines))


# -- coordinating shards ----------------------------------------------------------------------

def done_lines(work_dir, bounds):
    names = set(os.listdir(work_dir))
    return sum(end - start for c, (start, end) in enumerate(bounds) if os.path.basename(chunk_path(work_dir, c)) in names)


def progress_bar(args, n_lines, initial):
    from tqdm import tqdm

    return tqdm(total=n_lines, initial=initial, unit="line", desc="distill", disable=args.no_progress_bar,
                file=sys.stderr, dynamic_ncols=True)


def cpu_threads_per_shard(num_shards: int) -> str:
    """OMP_NUM_THREADS of each CPU worker: the cores shared out (torch would give each worker all of
    them; two workers on two cores then ran 10x slower than with one thread each)."""
    return str(max(1, (os.cpu_count() or 1) // num_shards))


def spawn_shards(args, argv):
    """Start one worker process per shard; with CUDA, worker i sees only GPU i % #GPUs; on a CPU each
    worker gets its share of the cores (unless OMP_NUM_THREADS is set)."""
    n_gpus = 0
    if args.device != "cpu":
        import torch

        n_gpus = torch.cuda.device_count()
    package_root = os.path.dirname(fairseq_plugins.__path__[0])
    procs = []
    for shard in range(args.num_shards):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])))
        if n_gpus:
            env["CUDA_VISIBLE_DEVICES"] = str(shard % n_gpus)
        elif "OMP_NUM_THREADS" not in os.environ:
            env["OMP_NUM_THREADS"] = cpu_threads_per_shard(args.num_shards)
        log = open(os.path.join(args.work_dir, f"shard-{shard}.log"), "w")
        cmd = [sys.executable, "-m", MODULE, *argv, "--shard-id", str(shard)]
        procs.append((shard, subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT), log))
    return procs


def wait_for_shards(args, procs, bounds, n_lines):
    bar = progress_bar(args, n_lines, done_lines(args.work_dir, bounds))
    try:
        while any(proc.poll() is None for _, proc, _ in procs):
            time.sleep(0.5)
            bar.update(done_lines(args.work_dir, bounds) - bar.n)
        bar.update(done_lines(args.work_dir, bounds) - bar.n)
    finally:
        bar.close()
        for _, proc, log in procs:
            if proc.poll() is None:
                proc.terminate()
            log.close()
    failed = [(shard, proc.returncode) for shard, proc, _ in procs if proc.returncode != 0]
    if failed:
        details = "; ".join(f"shard {shard} exited with {rc}: {log_tail(args.work_dir, shard)}" for shard, rc in failed)
        raise PluginError(f"{details} (finished chunks are kept: run the same command again to resume)")


def log_tail(work_dir, shard, n_chars=600):
    with open(os.path.join(work_dir, f"shard-{shard}.log"), errors="replace") as f:
        return " | ".join(f.read()[-n_chars:].strip().splitlines()[-5:])


def merge(args, n_lines):
    """Concatenate the chunks into OUTPUT (and their reports into OUTPUT.report.tsv)."""
    bounds = chunk_bounds(n_lines, args.chunk_size)
    missing = [c for c in range(len(bounds)) if not is_done(args.work_dir, c)]
    if missing:
        raise PluginError(f"{len(missing)} of {len(bounds)} chunks are not translated yet (first: lines "
                          f"{bounds[missing[0]][0] + 1}-{bounds[missing[0]][1]}); run the shards again")
    report = []
    with open(f"{args.output}.tmp", "w", encoding="utf-8") as out:
        for c, (start, end) in enumerate(bounds):
            with open(chunk_path(args.work_dir, c), encoding="utf-8") as f:
                lines = f.read().split("\n")[:-1]
            if len(lines) != end - start:
                raise PluginError(f"{chunk_path(args.work_dir, c)} has {len(lines)} lines, expected {end - start}; "
                                  f"delete it and run again")
            out.writelines(line + "\n" for line in lines)
            with open(chunk_path(args.work_dir, c, "report.tsv"), encoding="utf-8") as f:
                report.extend(f.read().splitlines())
    os.replace(f"{args.output}.tmp", args.output)
    write_atomically(f"{args.output}.report.tsv", ["line\treason\taction", *report])
    print_summary(args, n_lines, report)
    if not args.keep_work_dir:
        import shutil

        shutil.rmtree(args.work_dir)


def print_summary(args, n_lines, report):
    reasons = {}
    for row in report:
        reason = row.split("\t")[1].split("(")[0]
        reasons[reason] = reasons.get(reason, 0) + 1
    action = "reference line" if args.reference else "empty line"
    details = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items())) or "none"
    print(f"distill: wrote {n_lines} lines to {args.output}; not translated by the teacher ({action} written, "
          f"see {args.output}.report.tsv): {details}", file=sys.stderr)


def check_args(args, n_lines):
    if args.chunk_size < 1 or args.num_shards < 1:
        raise PluginError("--chunk-size and --num-shards must be >= 1")
    if args.shard_id is not None and not 0 <= args.shard_id < args.num_shards:
        raise PluginError(f"--shard-id must be in [0, {args.num_shards})")
    if args.reference and count_lines(args.reference) != n_lines:
        raise PluginError(f"--reference has {count_lines(args.reference)} lines, --input {n_lines}")


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    args = get_parser().parse_args(argv)
    args.work_dir = args.work_dir or f"{args.output}.work"
    n_lines = count_lines(args.input)
    check_args(args, n_lines)
    prepare_work_dir(args, n_lines)
    if args.shard_id is not None:  # one worker
        return run_shard(args, args.shard_id, args.num_shards, n_lines)
    bounds = chunk_bounds(n_lines, args.chunk_size)
    if not args.merge_only:
        n_done = sum(is_done(args.work_dir, c) for c in range(len(bounds)))
        if n_done:
            print(f"distill: resuming: {n_done} of {len(bounds)} chunks already done", file=sys.stderr)
        if args.num_shards == 1:
            with progress_bar(args, n_lines, done_lines(args.work_dir, bounds)) as bar:
                run_shard(args, 0, 1, n_lines, progress=bar)
        else:
            wait_for_shards(args, spawn_shards(args, argv), bounds, n_lines)
    merge(args, n_lines)


def cli_main():
    exit_on_plugin_error(main, "distill")


if __name__ == "__main__":
    cli_main()
