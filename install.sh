#!/usr/bin/env bash
# One-command install into the active Python environment (use a virtualenv):
#   bash install.sh
# Keeps an installed torch >= 2.1; otherwise installs $TORCH_SPEC (default torch==2.13.0).
# CPU-only machines: TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu bash install.sh
# (or install a CPU torch first) to avoid several GB of CUDA wheels.
# Contributors: EDITABLE=1 bash install.sh installs the working tree editable (pip install -e .):
# edits under fairseq_plugins/ and fairseq_plugins_compat/ take effect without reinstalling.
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
TORCH_INDEX_URL=${TORCH_INDEX_URL:-}
pip_install() { "$PYTHON" -m pip install --disable-pip-version-check "$@"; }

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
# fairseq 0.12.2 needs omegaconf<2.1, whose only release (2.0.6) has metadata that pip >= 24.1
# rejects; then this step runs pip 24.0 from its wheel (the environment's own pip is left as it is).
if ! "$PYTHON" -c 'import sys, pip; sys.exit(tuple(map(int, pip.__version__.split(".")[:2])) >= (24, 1))'; then
  "$PYTHON" -m pip download --disable-pip-version-check -q --no-deps -d "$WORK_DIR" pip==24.0
  pip_install() { "$PYTHON" "$WORK_DIR/pip-24.0-py3-none-any.whl/pip" install --disable-pip-version-check "$@"; }
fi
pip_install -c "$CONSTRAINTS" -r requirements.txt

echo "[3/4] fairseq 0.12.2 from PyPI (its sdist builds Cython/C++ parts; torchaudio is not needed)"
"$PYTHON" -c "import fairseq.data.data_utils_fast" 2>/dev/null && [ "$("$PYTHON" -c 'import fairseq; print(fairseq.__version__)' 2>/dev/null)" = 0.12.2 ] \
  || pip_install -c "$CONSTRAINTS" --no-deps fairseq==0.12.2

echo "[4/4] fairseq_plugins (+ the compat startup hook)"
if [ "${EDITABLE:-0}" = 1 ]; then
  pip_install -c "$CONSTRAINTS" --no-deps --no-build-isolation -e .
else
  pip_install -c "$CONSTRAINTS" --no-deps --no-build-isolation --force-reinstall .
fi
"$PYTHON" -c "import fairseq_plugins; print('fairseq_plugins installed, fairseq', __import__('fairseq').__version__, 'torch', __import__('torch').__version__)"
