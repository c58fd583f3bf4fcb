# Sourced (from the repo root) by the one-call device scripts gpu_session*.sh: the elapsed-time clock `el`, the
# output teed into $OUT/main.log, `pin CORES CMD...` (taskset, or plain with LOCAL=1), $R (their work folder), $REPO,
# gpu/dda unpacked (and gpu/dd made from its train split),
# then the install (docs/experiments/gpu_install.sh) with CPU=0 DEV=cuda, or with LOCAL=1 (a dry check on a CPU
# machine) this machine's venv with CPU=1 DEV=cpu; the functions `finetune_drafter`, `harness`, `graphed_check` and
# `cuda_tests` (below).
set -u
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
LOCAL=${LOCAL:-0}
if [ "$LOCAL" = 1 ]; then SENTENCES=20; else SENTENCES=${SENTENCES:-500}; fi  # the harness's test2016 sentences
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
# finetune_drafter NAME DATA FROM CORES: the demo drafter's fine-tune with the CPU fine-tune's settings (float32 on the
# GPU) on DATA from FROM, in $R/NAME, validating every 350 updates, until $END seconds after the start; then its
# validations (updates:spec_tokens_per_iter) and its best and last checkpoints as fp16 parts in $OUT
finetune_drafter() {
  local name=$1 data=$2 from=$3 cores=$4 stop pid which
  stop=$(python -c "print(round(max(60, $END - $(el)) / 3600, 4))")
  RUNS=$R CPU=$CPU FP16=0 SETTING=multi30k-drafter VERIFIER=$REPO/checkpoints/demo/verifier.pt DATA=$data \
    SAVE_DIR=$R/$name DROPOUT=0.1 LR=1.0e-4 WARMUP_INIT_LR=1.3e-4 WARMUP=6000 GLANCE_START=0.3 GLANCE_END=0.3 \
    MAX_EPOCH=1000 STOP_TIME_HOURS=$stop KEEP_LAST_EPOCHS=1 pin "$cores" bash recipes/train-drafter.sh \
    --finetune-from-model "$from" --validate-interval 1000 --save-interval 1000 \
    --validate-interval-updates 350 --save-interval-updates 350 --keep-interval-updates 1 > "$R/$name.out" 2>&1 &
  pid=$!
  while [ "$(el)" -lt "$END" ] && kill -0 $pid 2>/dev/null; do sleep 5; done
  pkill -f -- "--save-dir $R/$name"; wait $pid
  echo "fine-tune $name on $data:"
  grep "valid on" "$R/$name.out" | sed -E 's/.*spec_tokens_per_iter ([0-9.]+).*num_updates ([0-9]+).*/\2:\1/' | tr '\n' ' '; echo
  for which in best last; do
    python -m fairseq_plugins.scripts.export_checkpoint "$R/$name/checkpoint_$which.pt" "$R/${name}_$which.pt" --fp16 \
      && split -b 15M "$R/${name}_$which.pt" "$OUT/drafter_${name}_$which.pt.part-"
  done
  cp "$R/$name.out" "$OUT/"
}
# harness DRAFTER DECODERS SECONDS: the latency harness on core 15 (float32, batch 1, the first $SENTENCES test2016
# sentences of gpu/bin, 2 rounds, warm-up 10, --profile) with DRAFTER, killed after SECONDS; its tables printed,
# harness.md and harness.json in $OUT
harness() {
  local drafter=$1 decoders=$2 seconds=$3
  pin 15 timeout "$seconds" python -m fairseq_plugins.bench.latency "$REPO/gpu/bin" --path checkpoints/demo/verifier.pt \
    --drafter-path "$drafter" --source-lang en --target-lang de --remove-bpe sentencepiece \
    --max-len-a 1.2 --max-len-b 10 --threads 1 --device "$DEV" --no-ctranslate2 --no-progress-bar --profile \
    --max-sentences "$SENTENCES" --rounds 2 --warmup 10 --decoders "$decoders" \
    --out-md "$OUT/harness.md" --out-json "$OUT/harness.json" > "$R/harness.log" 2>&1; echo "harness rc $?"
  grep '^|' "$OUT/harness.md" 2>/dev/null || tail -20 "$R/harness.log"
  echo "[$(el)s] harness done"
}
# graphed_check: docs/experiments/graphed_drafter.py on $DEV with the demo pair (--cuda-graphs on vs off, drafts
# compared call by call) on the first CHECK_SENTENCES (default 60) test2016 sentences of gpu/, killed after CTIME
graphed_check() {
  mkdir -p "$R/check/multi30k" "$R/check/m30raw"
  ln -sfn "$REPO/gpu/bin" "$R/check/multi30k/bin"; ln -sf "$REPO/gpu/test.en" "$R/check/m30raw/test.en"
  RUNS=$R/check pin 15 timeout "${CTIME:-100}" python docs/experiments/graphed_drafter.py "${CHECK_SENTENCES:-60}" \
    "$DEV" > "$R/check.log" 2>&1; echo "check rc $?"
  grep -v "| INFO |" "$R/check.log" | tail -4; cp "$R/check.log" "$OUT/"
  echo "[$(el)s] check done"
}
# cuda_tests SELECTION: tests/test_cuda_graphs.py and tests/test_cuda.py, pytest -k SELECTION, killed after TTIME
cuda_tests() {
  pin 0-13 timeout "${TTIME:-200}" python -m pytest -q -x tests/test_cuda_graphs.py tests/test_cuda.py \
    -k "$1" > "$R/tests.log" 2>&1; echo "tests rc $?"
  tail -5 "$R/tests.log"; cp "$R/tests.log" "$OUT/"
  echo "[$(el)s] tests done"
}
