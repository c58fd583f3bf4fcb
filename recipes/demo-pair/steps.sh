# Shared by the demo pair's recipes (source it): recipes/lib/common.sh (RUNS, log, skip-if-done, input checks), the
# folders they read and write, and their steps.
# shellcheck shell=bash
. "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
DEMO=${DEMO:-$REPO/checkpoints/demo}     # the shipped pair: its sentencepiece model and dictionaries are the data's
WORK=${WORK:-$RUNS/demo-pair}            # everything these recipes write
DEMO_DATA=${DEMO_DATA:-$WORK/data}       # data.sh's output: spm/ (encoded text) and bin/
START=${START:-$WORK/start}              # the earlier demo pair the shipped one was trained from
START_COMMIT=${START_COMMIT:-38b53bd}    # the commit that shipped it
THREADS=${THREADS:-2}                    # torch threads of each training
DEVICE=${DEVICE:-cpu}                    # where the teachers translate (cpu | cuda | auto)

# start_pair: the earlier demo verifier and drafter, out of the repository's history, into $START
start_pair() {
  local name
  mkdir -p "$START"
  for name in verifier drafter; do
    all_exist "$START/$name.pt" && continue
    git -C "$REPO" show "$START_COMMIT:checkpoints/demo/$name.pt" > "$START/$name.pt.part" \
      || die "git show $START_COMMIT:checkpoints/demo/$name.pt failed: these recipes need a clone with its history"
    mv "$START/$name.pt.part" "$START/$name.pt"
  done
}

# need_data: die in one line unless data.sh has run
need_data() {
  check_inputs "DEMO_DATA/spm/train.en=$DEMO_DATA/spm/train.en" "DEMO_DATA/bin/dict.en.txt=$DEMO_DATA/bin/dict.en.txt"
}

# translations TEACHER OUT BEAM MORE_SOURCES: TEACHER's translations of the 29,000 training sources and of
# MORE_SOURCES passes of word substitutions over them (recipes/distill.sh), binarized in OUT/bin; once
translations() {
  all_exist "$2/bin/train1.en-de.de.bin" && return
  TEACHER=$1 RAW=$DEMO_DATA/spm VERIFIER_DATA=$DEMO_DATA/bin OUT=$2 BEAM=$3 MORE_SOURCES=$4 DEVICE=$DEVICE \
    bash "$REPO/recipes/distill.sh"
}

# finetune_drafter DIR VERIFIER DATA INIT [OPTION...]: drafter INIT fine-tuned in DIR on VERIFIER's translations DATA
# with the demo drafter's settings (constant lr 1e-4, no dropout, glancing ratio 0.3, bfloat16 autocast on the CPU);
# the environment sets MAX_UPDATE and the like, OPTIONs go to fairseq-train; once
finetune_drafter() {
  local dir=$1 verifier=$2 data=$3 init=$4
  shift 4
  all_exist "$dir/finished" && return
  CPU=1 THREADS=$THREADS SETTING=multi30k-drafter VERIFIER=$verifier DATA=$data SAVE_DIR=$dir DROPOUT=0.0 LR=1e-4 \
    WARMUP_INIT_LR=1e-4 WARMUP=10000 GLANCE_START=0.3 GLANCE_END=0.3 MAX_EPOCH=1000 KEEP_LAST_EPOCHS=1 \
    bash "$REPO/recipes/train-drafter.sh" --finetune-from-model "$init" --cpu-autocast bf16 "$@"
  date > "$dir/finished"
}
