#!/usr/bin/env bash
# Prepares, on this (CPU) machine, what the one-call device scripts (gpu_session*.sh) carry to a lent GPU machine,
# which has no network and its image's Python 3.12 + CUDA torch: run from the repo root, then carry ".whl" and "gpu".
#   .whl/     the wheels the image lacks (hydra-core 1.0.7, omegaconf 2.0.6, antlr4-python3-runtime 4.8 built as
#             wheels; bitarray, cffi, pycparser, subword-nmt, mock, sacremoses and pip 24.0 for CPython 3.12 on
#             manylinux x86_64) and fairseq 0.12.2's sdist (its Cython parts are built there: gpu_install.sh)
#   gpu/bin   the binarized Multi30k ($RUNS/multi30k/bin: recipes/data/prepare-with-model.sh, README Results)
#   gpu/test.en  test2016's raw English ($RUNS/m30raw/test.en)
#   gpu/dtd   the train split of a distillation for the double-token pair, when DISTILLED names its binarized dir
#             (e.g. $RUNS/multi30k/distilled-single-beam5/bin); without it gpu_session3.sh skips that training
#   gpu/dd    the verifier's greedy distillation (train and valid) for the drafter, when DRAFTER_DATA names its
#             binarized dir (recipes/distill.sh with TEACHER=checkpoints/demo/verifier.pt: $RUNS/multi30k/distilled/bin)
#   gpu/dda   that distillation plus more sources as train1 (train2, ...), when AUG_DATA names its binarized dir
#             (recipes/distill.sh with MORE_SOURCES=2: its bin, or $RUNS/multi30k/aug/bin; $RUNS/multi30k/aug/bin2
#             adds train2, 110,720 more; links are copied as files), as gpu/dda.tar.xz; with it gpu/dd is not needed
#             (the device makes it from dda's train split): leave DRAFTER_DATA out
#   gpu/dda3  the same for AUG_DATA3 (a bin with still more sources, for gpu_session5.sh), packed as dda3.tar.xz
# Both are ignored (.git/info/exclude); ~15 MB of wheels + ~5 MB of data, within the carry limit of 64 MiB.
#   RUNS=/work/runs [DISTILLED=...] [DRAFTER_DATA=...] [AUG_DATA=...] [AUG_DATA3=...] bash docs/experiments/gpu_prepare.sh
set -euo pipefail
RUNS=${RUNS:-../runs}
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || printf '/.whl/\n/gpu/\n' >> .git/info/exclude
mkdir -p .whl gpu
PLATFORM=(--python-version 3.12 --implementation cp --abi cp312 --platform manylinux2014_x86_64 --only-binary=:all:)
python -m pip download -q --no-deps -d .whl "${PLATFORM[@]}" bitarray cffi pycparser subword-nmt mock sacremoses pip==24.0
python - <<'PY'  # the sdist as published (pip download would build its metadata, which needs torch)
import hashlib, re, urllib.request
page = urllib.request.urlopen("https://pypi.org/simple/fairseq/", timeout=60).read().decode()
url, sha = re.search(r'href="([^"#]*fairseq-0\.12\.2\.tar\.gz)#sha256=([0-9a-f]+)"', page).groups()
data = urllib.request.urlopen(url, timeout=300).read()
assert hashlib.sha256(data).hexdigest() == sha, "fairseq-0.12.2.tar.gz: checksum mismatch"
open(".whl/fairseq-0.12.2.tar.gz", "wb").write(data)
PY
python -m pip wheel -q --no-deps -w .whl hydra-core==1.0.7 omegaconf==2.0.6 antlr4-python3-runtime==4.8
[ -s "$RUNS/multi30k/bin/train.en-de.en.bin" ] || { echo "no $RUNS/multi30k/bin (README Results: the data command)"; exit 1; }
rm -rf gpu/bin && cp -r "$RUNS/multi30k/bin" gpu/bin
cp "$RUNS/m30raw/test.en" gpu/test.en  # test2016's raw sources, for the scripts that translate text (gpu_session8.sh)
if [ -n "${DISTILLED:-}" ]; then
  rm -rf gpu/dtd && mkdir gpu/dtd && cp "$DISTILLED"/train.* "$DISTILLED"/dict.* gpu/dtd/
fi
if [ -n "${DRAFTER_DATA:-}" ]; then
  rm -rf gpu/dd && mkdir gpu/dd && cp "$DRAFTER_DATA"/train.* "$DRAFTER_DATA"/valid.* "$DRAFTER_DATA"/dict.* gpu/dd/
fi
# pack NAME DIR: DIR's train splits (train, train1, ...), valid and dictionaries as gpu/NAME.tar.xz (links copied as
# files; xz: 17 MB -> 3.3 MB for aug/bin2), unpacked on the device by gpu_prelude.sh
pack() {
  rm -rf "gpu/$1" "gpu/$1.tar.xz" && mkdir "gpu/$1" && cp -L "$2"/train*.* "$2"/valid.* "$2"/dict.* "gpu/$1/"
  tar -C gpu -cJf "gpu/$1.tar.xz" "$1" && rm -rf "gpu/$1"
}
if [ -n "${AUG_DATA3:-}" ]; then pack dda3 "$AUG_DATA3"; fi  # for gpu_session5.sh: a bin with still more sources
if [ -n "${AUG_DATA:-}" ]; then pack dda "$AUG_DATA"; fi
du -sh .whl gpu; ls .whl
