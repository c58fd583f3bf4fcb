# Sourced (from the repo root) by the one-call device scripts gpu_session*.sh: the elapsed-time clock `el`, the
# output teed into $OUT/main.log, `pin CORES CMD...` (taskset, or plain with LOCAL=1), $R (their work folder), $REPO,
# gpu/dda unpacked (and gpu/dd made from its train split),
# then the install (docs/experiments/gpu_install.sh) with CPU=0 DEV=cuda, or with LOCAL=1 (a dry check on a CPU
# machine) this machine's venv with CPU=1 DEV=cpu.
set -u
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
LOCAL=${LOCAL:-0}
R=${R:-/tmp/runs}; mkdir -p "$R"
exec > >(tee -a "$OUT/main.log") 2>&1
pin() { local cores=$1; shift; if [ "$LOCAL" = 1 ]; then "$@"; else taskset -c "$cores" "$@"; fi; }
REPO=$PWD
for packed in gpu/dda.tar.xz gpu/dda3.tar.xz; do  # gpu_prepare.sh packs them to fit the carry limit
  if [ -s "$packed" ] && [ ! -d "${packed%.tar.xz}" ]; then tar -C gpu -xJf "$packed"; fi
done
if [ -d gpu/dda ] && [ ! -d gpu/dd ]; then  # the first distillation alone: dda's train split
  mkdir gpu/dd && cp gpu/dda/dict.* gpu/dda/train.* gpu/dda/valid.* gpu/dd/
fi
echo "[$(el)s] start on $(hostname); $(nproc) cores"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null
if [ "$LOCAL" = 1 ]; then
  source /work/venv/bin/activate; CPU=1; DEV=cpu
else
  CPU=0; DEV=cuda
  . docs/experiments/gpu_install.sh "$R/install.log"
fi
python -c 'import torch, sys; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")'
echo "[$(el)s] installed"
