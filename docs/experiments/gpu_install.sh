# Sourced (from the repo root) by gpu_session.sh and gpu_verify.sh on the lent GPU machine: the README
# install from the carried wheels (.whl/), fairseq's Cython parts built there.   . docs/experiments/gpu_install.sh LOG
source "$(dirname "$(command -v python3)")/activate"
export PIP_NO_INDEX=1 PIP_FIND_LINKS=$PWD/.whl PIP_DISABLE_PIP_VERSION_CHECK=1
unset CUDA_HOME
# torch hidden from fairseq's build: with it, the sdist tries to compile C++/CUDA parts whose sources it lacks
mkdir -p /tmp/notorch/torch; echo 'raise ImportError("torch hidden from the fairseq build")' > /tmp/notorch/torch/__init__.py
PYTHONPATH=/tmp/notorch python -m pip install -q --no-build-isolation --no-deps .whl/fairseq-0.12.2.tar.gz > "$1" 2>&1 \
  || { echo "fairseq build FAILED"; tail -20 "$1"; }
sed -i '/^ctranslate2/d' requirements.txt  # not among the carried wheels (the device copy only)
EDITABLE=1 bash install.sh >> "$1" 2>&1 || { echo "install.sh FAILED"; tail -30 "$1"; }
tail -1 "$1"
