# Shared helpers for the recipes; source it:  . "$(dirname "$0")/lib/common.sh"
# Defines REPO (repository root), RUNS (root of every default output path), log/die,
# skip-if-done and input checks, python/fairseq wrappers.
# shellcheck shell=bash
REPO=${REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
# Data, checkpoints and tables go under RUNS unless a recipe is given explicit paths (OUT, DATA,
# SAVE_DIR...): by default the folder "runs" beside the checkout, so that nothing lands in the
# repository and the paths do not depend on the directory a recipe is started from.
RUNS=${RUNS:-$(dirname "$REPO")/runs}
PYTHON=${PYTHON:-python}
DRY_RUN=${DRY_RUN:-0}                          # 1: tiny slice, tiny model, CPU (see recipes/README.md)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}   # torch oversubscribes small machines otherwise
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
USER_DIR=${USER_DIR:-$REPO/fairseq_plugins}

set -E  # report where a recipe stops (set -e alone exits silently)
trap 'rc=$?; echo "[$(date +%H:%M:%S)] FAILED (exit $rc) at ${BASH_SOURCE[0]}:$LINENO: $BASH_COMMAND" >&2' ERR

# cpu_training_env: settings for fairseq-train on a CPU.  oneDNN keeps a cache of compiled products (default
# 1,024 entries); with it a Multi30k double-token trainer in bfloat16 autocast grew past 4 GB within 270 updates
# (~6.5 GB after hours), with 16 entries it stayed at ~2 GB at the same words/s
cpu_training_env() { export ONEDNN_PRIMITIVE_CACHE_CAPACITY=${ONEDNN_PRIMITIVE_CACHE_CAPACITY:-16}; }

# default_num_workers: fairseq-train's data-loading processes, none on a CPU (CPU=1): a worker adds no compute
# beside a one-thread trainer, and the valid iterator's worker, forked once the trainer has grown, keeps a private
# copy of its memory (~2.8 GB for a double-token trainer); one on a GPU
default_num_workers() { if [ "${CPU:-0}" = 1 ]; then echo 0; else echo 1; fi; }

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
# flag NAME...: each variable NAME holds 0 or 1, else a one-line error (DRY_RUN=true must not start a full run)
flag() {
  local name
  for name in "$@"; do case ${!name} in 0 | 1) ;; *) die "$name must be 0 or 1, not '${!name}'" ;; esac; done
}
flag DRY_RUN
# last_option NAME DEFAULT ARGS...: the value of the last "NAME VALUE" in ARGS, else DEFAULT
# (options after a recipe's name override its settings: fairseq-train keeps the last)
last_option() {
  local name=$1 value=$2; shift 2
  while [ $# -gt 0 ]; do
    if [ "$1" = "$name" ] && [ $# -gt 1 ]; then value=$2; shift; fi
    shift
  done
  echo "$value"
}

# need_fairseq: die in one line unless PYTHON finds torch and fairseq (the README install's environment). It looks
# them up without importing them: an import costs ~3 s, and every training recipe checks
need_fairseq() {
  "$PYTHON" -c 'import importlib.util as u, sys; sys.exit(not (u.find_spec("torch") and u.find_spec("fairseq")))' \
    2> /dev/null \
    || die "$PYTHON cannot import torch and fairseq: activate the environment of the README install (bash install.sh)"
}

# all_exist FILE...: true when every file exists and is non-empty (stage outputs present -> skip)
all_exist() { local f; for f in "$@"; do [ -s "$f" ] || return 1; done; }

# check_inputs NAME=FILE...: die with ONE line naming every missing or empty FILE (by its NAME;
# an empty FILE: "NAME (not set)"), then INPUTS_HINT if set
check_inputs() {
  local item missing=()
  for item in "$@"; do
    if [ -z "${item#*=}" ]; then missing+=("${item%%=*} (not set)")
    elif [ ! -s "${item#*=}" ]; then missing+=("$item"); fi
  done
  [ ${#missing[@]} = 0 ] \
    || die "missing input(s): $(IFS=';'; echo "${missing[*]}" | sed 's/;/; /g')${INPUTS_HINT:-}"
}

# load_setting: recipes/settings/$SETTING.sh sourced when SETTING is set; an unknown name is one line listing them
load_setting() {
  [ -n "${SETTING:-}" ] || return 0
  local file=$REPO/recipes/settings/$SETTING.sh names
  if [ ! -f "$file" ]; then
    names=$(cd "$REPO/recipes/settings" && for f in *.sh; do printf '%s ' "${f%.sh}"; done)
    die "SETTING=$SETTING: no recipes/settings/$SETTING.sh (settings: ${names% })"
  fi
  # shellcheck disable=SC1090
  . "$file"
}
# keep_dry_runs_apart DIR: a dry run and a real run never share DIR, whose finished outputs each takes for its own
# (a real run would skip every stage after a dry run's tiny ones): a dry run marks DIR with DIR/.dry-run and refuses a
# DIR a real run wrote into; a real run refuses a marked DIR
keep_dry_runs_apart() {
  if [ "$DRY_RUN" = 1 ]; then
    if [ -d "$1" ] && [ ! -e "$1/.dry-run" ] && [ -n "$(ls -A "$1")" ]; then
      die "$1 holds a real run's outputs: give the dry run another OUT"
    fi
    mkdir -p "$1" && touch "$1/.dry-run"
  elif [ -e "$1/.dry-run" ]; then
    die "$1 holds a dry run's outputs (DRY_RUN=1): give another OUT, or delete that folder"
  fi
}
# abspath PATH: PATH made absolute against the current directory (paths saved in checkpoints stay valid)
abspath() { case $1 in /*) echo "$1" ;; *) echo "$PWD/${1#./}" ;; esac; }
# relative PATH: PATH relative to the current directory (tables printed from the clone name paths as a clone has them)
relative() { "$PYTHON" -c 'import os, sys; print(os.path.relpath(sys.argv[1]))' "$1"; }
# check_shippable FILE NAME: die in one line when FILE is over MAX_MB MiB (2^20 bytes), naming it NAME
check_shippable() {
  local size; size=$(wc -c < "$1")
  [ "$size" -le "$(awk -v mb="$MAX_MB" 'BEGIN { printf "%d", mb * 1048576 }')" ] \
    || die "$2 would be $(awk -v b="$size" 'BEGIN { printf "%.2f", b / 1048576 }') MiB, over MAX_MB=$MAX_MB: not shipped"
}

# kill_tree PID: PID and all its descendants (a background stage left behind by a failure)
kill_tree() {
  [ -n "${1:-}" ] || return 0
  local child
  for child in $(pgrep -P "$1" 2>/dev/null || true); do kill_tree "$child"; done
  kill "$1" 2>/dev/null || true
}

# console script from the active environment, else the module (e.g. a source checkout)
average_checkpoints() {
  if command -v fairseq-average-checkpoints >/dev/null; then fairseq-average-checkpoints "$@"
  else "$PYTHON" -m fairseq_plugins.scripts.average_checkpoints "$@"; fi
}

# export_fp16 CHECKPOINT OUT [OPTION...]: the inference-only copy with float16-number weights (as checkpoints/demo's),
# once (an existing OUT is kept)
export_fp16() {
  all_exist "$2" && return
  "$PYTHON" -m fairseq_plugins.scripts.export_checkpoint "$1" "$2" --fp16 "${@:3}"
}

# fetch URL DEST: download (curl or wget) to DEST atomically
fetch() {
  local url=$1 dest=$2
  log "downloading $url"
  # || die: also inside $(...), where set -e does not stop at the failed download (local_or_fetch's callers)
  if command -v curl >/dev/null; then curl -fSL --retry 3 -o "$dest.part" "$url" || die "download failed: $url"
  else wget -q -O "$dest.part" "$url" || die "download failed: $url"; fi
  mv "$dest.part" "$dest"
}

# local_or_fetch LOCAL URL DEST [gz]: print LOCAL if it exists, else download URL to DEST once
# (gz: URL is gzipped, DEST is the decompressed file) and print DEST
local_or_fetch() {
  if [ -s "$1" ]; then echo "$1"; return; fi
  [ "$DRY_RUN" = 1 ] && die "dry run: local file $1 is missing (dry runs do not download)"
  mkdir -p "$(dirname "$3")"
  if ! all_exist "$3"; then
    if [ "${4:-}" = gz ]; then fetch "$2" "$3.gz" >&2 && gunzip -f "$3.gz"; else fetch "$2" "$3" >&2; fi
  fi
  echo "$3"
}

# dry_slice FILE [FROM] [COUNT]: DRY_RUN=1: COUNT (default DRY_LINES) lines from line FROM; else the file
dry_slice() {
  if [ "$DRY_RUN" != 1 ]; then cat "$1"; return; fi
  local from=${2:-1} count=${3:-${DRY_LINES:-200}}
  sed -n "${from},$((from + count - 1))p;$((from + count - 1))q" "$1"
}

# sacrebleu_echo TESTSET LANGPAIR src|ref: a standard test set through sacreBLEU's own downloader
sacrebleu_echo() { sacrebleu -t "$1" -l "$2" --echo "$3"; }
# dry_need FILE: in a dry run, die in one line when the local FILE is missing (dry runs do not download)
dry_need() {
  if [ "$DRY_RUN" = 1 ] && [ ! -s "$1" ]; then die "dry run: local file $1 is missing (dry runs do not download; set WMT_DIR)"; fi
}

# spm_learn_encode SPM_DIR VOCAB TYPE TRAIN_FILES(comma list) IN_DIR OUT_DIR SPLIT... -- LANG...
# learns one joint sentencepiece model (unless present) and encodes IN_DIR/SPLIT.LANG -> OUT_DIR/SPLIT.LANG
spm_learn_encode() {
  local spm_dir=$1 vocab=$2 type=$3 train=$4 in_dir=$5 out_dir=$6; shift 6
  local splits=() langs=() split lang
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do splits+=("$1"); shift; done
  shift; langs=("$@")
  mkdir -p "$spm_dir" "$out_dir"
  if ! all_exist "$spm_dir/spm.model"; then
    log "learning sentencepiece ($type, vocab $vocab) on $train"
    # shellcheck disable=SC2086  # SPM_FLAGS: extra spm.py train options, word-split
    "$PYTHON" "$REPO/recipes/lib/spm.py" train --input "$train" --model-prefix "$spm_dir/spm" \
      --vocab-size "$vocab" --model-type "$type" ${SPM_FLAGS:-}
  fi
  for split in "${splits[@]}"; do for lang in "${langs[@]}"; do
    spm_encode "$spm_dir/spm.model" "$in_dir/$split.$lang" "$out_dir/$split.$lang"
  done; done
}

# spm_encode MODEL IN OUT: IN encoded with the sentencepiece MODEL into OUT (skipped when OUT exists)
spm_encode() {
  all_exist "$3" && return 0
  "$PYTHON" "$REPO/recipes/lib/spm.py" encode --model "$1" < "$2" > "$3.tmp"
  mv "$3.tmp" "$3"
}
