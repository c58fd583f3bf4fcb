"""Does a harness row pay for the caches the row before it evicted?  CTranslate2 greedy and lossless SpecDec (the demo
pair, batch 1, one thread) on 10-sentence chunks of test2016: each engine's time for a chunk right after decoding 10
other sentences itself (warm) and right after stock greedy (fairseq's SequenceGenerator, --beam 1) decoded 10 other
sentences (cold), argv[1] chunks each.  Needs the harness's CTranslate2 conversion in $RUNS/ct2-demo.  Run from the
repository root: ``RUNS=... python docs/experiments/row_cold_start.py 40``
"""
import statistics
import sys
import time

import ctranslate2
import torch
from fairseq.sequence_generator import SequenceGenerator

import demo_pair  # docs/experiments/demo_pair.py (the script's own folder is on sys.path)

torch.set_num_threads(1)
translator = demo_pair.load()
samples = demo_pair.samples(translator, 1000, "test")
pieces = [line.split() for line in open(demo_pair.RUNS + "/multi30k/spm/test.en").read().splitlines()]
ct2 = ctranslate2.Translator(demo_pair.RUNS + "/ct2-demo", device="cpu", compute_type="default", inter_threads=1,
                             intra_threads=1)
stock = SequenceGenerator(translator.models, translator.task.target_dictionary, beam_size=1, max_len_a=1.2,
                          max_len_b=10)


def ctranslate2_greedy(ids):
    for i in ids:  # fairseq's length limit: 1.2 * (source + EOS) + 10
        ct2.translate_batch([pieces[i]], beam_size=1, max_decoding_length=int(1.2 * (len(pieces[i]) + 1) + 10))


def specdec(ids):
    for i in ids:
        translator.generator.generate(translator.models, samples[i])


def stock_greedy(ids):
    with torch.inference_mode():
        for i in ids:
            stock.generate(translator.models, samples[i])


def timed(run, ids):
    start = time.perf_counter()
    run(ids)
    return time.perf_counter() - start


engines = {"CTranslate2 greedy": ctranslate2_greedy, "SpecDec": specdec}
seconds = {(name, when): [] for name in engines for when in ("warm", "cold")}
for run in (*engines.values(), stock_greedy):
    run(range(10))
for chunk in range(int(sys.argv[1])):
    ids, others = range(10 + 20 * chunk, 20 + 20 * chunk), range(20 + 20 * chunk, 30 + 20 * chunk)
    for name, run in engines.items():
        run(others)
        seconds[name, "warm"].append(timed(run, ids))
        stock_greedy(others)
        seconds[name, "cold"].append(timed(run, ids))
for name in engines:
    warm, cold = seconds[name, "warm"], seconds[name, "cold"]
    print(f"{name}: after itself {1e3 * statistics.median(warm):.1f} ms median a chunk ({sum(warm):.2f} s in all), "
          f"after stock greedy {1e3 * statistics.median(cold):.1f} ms ({sum(cold):.2f} s): "
          f"{sum(cold) / sum(warm):.3f} the time")
