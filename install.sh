#!/usr/bin/env bash
# One-command install into the active Python environment (use a virtualenv):
#   bash install.sh
# Keeps an installed torch >= 2.1; otherwise installs $TORCH_SPEC (default torch==2.13.0).
# CPU-only machines: TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu bash install.sh
# (or install a CPU torch first) to avoid several GB of CUDA wheels.
# Contributors: EDITABLE=1 bash install.sh installs the working tree editable (pip install -e .):
# edits under fairseq_plugins/ and fairseq_plugins_compat/ take effect without reinstalling.
# A machine without network (a GPU node with its own torch, say):
#   PYTHON=python3.12 bash install.sh --download DIR   # on a networked machine of the same platform, with the
#                                                      # offline machine's Python version: every package but torch
#   WHEELHOUSE=DIR bash install.sh                     # on the offline machine: installs from DIR only
# (optional requirements, e.g. ctranslate2, may be deleted from DIR: they are then skipped).
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
TORCH_INDEX_URL=${TORCH_INDEX_URL:-}
WHEELHOUSE=${WHEELHOUSE:-}
INDEX=()
if [ -n "$WHEELHOUSE" ]; then
  [ -d "$WHEELHOUSE" ] || { echo "install.sh: WHEELHOUSE=$WHEELHOUSE is not a folder" >&2; exit 2; }
  INDEX=(--no-index --find-links "$(cd "$WHEELHOUSE" && pwd)")
fi
PIP=("$PYTHON" -m pip)  # use_pip_24 may replace it
pip_install() { "${PIP[@]}" install --disable-pip-version-check "${INDEX[@]}" "$@"; }

# pip 24.0, for omegaconf 2.0.6 (fairseq 0.12.2 needs omegaconf<2.1), whose metadata pip >= 24.1 rejects: the
# environment's own pip where it is older, else pip 24.0 run from its wheel (the environment's pip is left as it is)
use_pip_24() {
  if ! "$PYTHON" -c 'import sys, pip; sys.exit(tuple(map(int, pip.__version__.split(".")[:2])) >= (24, 1))'; then
    "${PIP[@]}" download --disable-pip-version-check "${INDEX[@]}" -q --no-deps -d "$WORK_DIR" pip==24.0
    PIP=("$PYTHON" "$WORK_DIR/pip-24.0-py3-none-any.whl/pip")
  fi
}

# --download DIR: requirements.txt's packages for this Python and platform (pure-Python source releases built
# into wheels), pip 24.0, setuptools and wheel, and fairseq 0.12.2's source release (built where it is installed)
if [ "${1:-}" = --download ]; then
  [ -n "${2:-}" ] || { echo "usage: bash install.sh --download DIR" >&2; exit 2; }
  mkdir -p "$2"; DIR=$(cd "$2" && pwd)
  WORK_DIR=$(mktemp -d); trap 'rm -rf "$WORK_DIR"' EXIT
  use_pip_24
  "${PIP[@]}" download --disable-pip-version-check -d "$DIR" -r requirements.txt pip==24.0 setuptools wheel
  "$PYTHON" - "$DIR" <<'PY'  # pip would build fairseq to read its metadata, which needs torch: PyPI's file as it is
import hashlib, json, sys, urllib.request
index = urllib.request.Request("https://pypi.org/simple/fairseq/",
                               headers={"Accept": "application/vnd.pypi.simple.v1+json"})
(sdist,) = [f for f in json.load(urllib.request.urlopen(index))["files"] if f["filename"] == "fairseq-0.12.2.tar.gz"]
data = urllib.request.urlopen(sdist["url"]).read()
assert hashlib.sha256(data).hexdigest() == sdist["hashes"]["sha256"], "fairseq 0.12.2: checksum mismatch"
open(f"{sys.argv[1]}/{sdist['filename']}", "wb").write(data)
PY
  for sdist in "$DIR"/*.tar.gz "$DIR"/*.zip; do
    [ -e "$sdist" ] && [[ "$(basename "$sdist")" != fairseq-* ]] || continue
    "${PIP[@]}" wheel --disable-pip-version-check -q --no-deps -w "$DIR" "$sdist" && rm "$sdist"
  done
  echo "wheelhouse for Python $("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])'): $DIR" \
       "($(du -sh "$DIR" | cut -f1)); install there with: WHEELHOUSE=DIR bash install.sh"
  exit 0
fi

torch_version() {
  "$PYTHON" - <<'PY' 2>/dev/null
import re, torch
major, minor = map(int, re.match(r"(\d+)\.(\d+)", torch.__version__).groups())
print(torch.__version__ if (major, minor) >= (2, 1) else "")
PY
}

echo "[1/4] torch"
if [ -z "$(torch_version)" ]; then
  pip_install "$TORCH_SPEC" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
fi
TORCH_VERSION=$(torch_version)
echo "using torch $TORCH_VERSION"
WORK_DIR=$(mktemp -d)
trap 'rm -rf "$WORK_DIR"' EXIT
CONSTRAINTS=$WORK_DIR/constraints.txt
echo "torch==$TORCH_VERSION" > "$CONSTRAINTS"  # nothing below may replace it

echo "[2/4] dependencies (requirements.txt)"
use_pip_24
REQUIREMENTS=requirements.txt
if [ -n "$WHEELHOUSE" ]; then  # optional requirements that are not in the wheelhouse are skipped
  REQUIREMENTS=$WORK_DIR/requirements.txt
  available=$(ls "$WHEELHOUSE" | tr 'A-Z_' 'a-z-')  # file names as normalised project names
  while IFS= read -r line; do
    name=$(sed 's/[ #<>=;\[].*//' <<< "$line" | tr 'A-Z_' 'a-z-')
    if [[ "$line" == *"# optional"* ]] && ! grep -q "^$name-" <<< "$available"; then
      echo "skipped (not in $WHEELHOUSE): $line" >&2; continue
    fi
    echo "$line"
  done < requirements.txt > "$REQUIREMENTS"
fi
pip_install -c "$CONSTRAINTS" -r "$REQUIREMENTS"

echo "[3/4] fairseq 0.12.2 from ${WHEELHOUSE:-PyPI} (its sdist builds Cython/C++ parts; torchaudio is not needed)"
"$PYTHON" -c "import fairseq.data.data_utils_fast" 2>/dev/null && [ "$("$PYTHON" -c 'import fairseq; print(fairseq.__version__)' 2>/dev/null)" = 0.12.2 ] \
  || pip_install -c "$CONSTRAINTS" --no-deps fairseq==0.12.2

echo "[4/4] fairseq_plugins (+ the compat startup hook)"
if [ "${EDITABLE:-0}" = 1 ]; then
  pip_install -c "$CONSTRAINTS" --no-deps --no-build-isolation -e .
else
  pip_install -c "$CONSTRAINTS" --no-deps --no-build-isolation --force-reinstall .
fi
"$PYTHON" -c "import fairseq_plugins; print('fairseq_plugins installed, fairseq', __import__('fairseq').__version__, 'torch', __import__('torch').__version__)"
