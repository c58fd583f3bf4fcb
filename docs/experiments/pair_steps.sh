# Shell functions shared by continued_verifier.sh, frozen_encoder_student.sh, beam_student.sh and more_sources_drafter.sh (sourced after they
# set RUNS): the previous demo pair, sharded distillation of the training and substituted sources, the drafter's
# fine-tune, fp16 export and harness runs on test2016.

previous_demo_pair() {  # previous_demo_pair DIR: the demo pair both experiments started from (git show 38b53bd)
  mkdir -p "$1"
  local f
  for f in verifier drafter; do [ -s "$1/$f.pt" ] || git show "38b53bd:checkpoints/demo/$f.pt" > "$1/$f.pt"; done
}

distil_sharded() {  # distil_sharded TEACHER INPUT OUTPUT [BEAM]: the teacher's translations (greedy unless BEAM), one shard per core, once
  [ -s "$3" ] && return
  local shard options=(--teacher "$1" --data "$RUNS/multi30k/bin" --input "$2" --output "$3" --beam "${4:-1}"
                       --max-len-a 1.2 --max-len-b 10 --num-shards 2 --no-progress-bar)
  for shard in 0 1; do python -m fairseq_plugins.distill "${options[@]}" --shard-id $shard & done
  wait
  python -m fairseq_plugins.distill "${options[@]}" --merge-only
}

distil_sources() {  # distil_sources TEACHER OUT BEAM: the teacher's translations of the 29,000 training sources and the
  # 113,558 substituted ones (continued_verifier.sh's, $RUNS/v2/greedy/text/more-4.en), then binarized with valid's
  # into OUT/bin by recipes/distill.sh (which finds the training files done), once
  local text=$2/text
  mkdir -p "$text"
  [ -s "$text/train.en" ] || cp "$RUNS/multi30k/spm/train.en" "$text/train.en"
  [ -s "$text/more-4.en" ] || cp "$RUNS/v2/greedy/text/more-4.en" "$text/more-4.en"
  distil_sharded "$1" "$text/train.en" "$text/train.de" "$3"
  distil_sharded "$1" "$text/more-4.en" "$text/more-4.de" "$3"
  [ -s "$2/bin/train1.en-de.en.bin" ] || TEACHER=$1 RAW=$RUNS/multi30k/spm VERIFIER_DATA=$RUNS/multi30k/bin \
    OUT=$2 BEAM=$3 MORE_SOURCES=4 DEVICE=cpu bash recipes/distill.sh
}

finetune_drafter() {  # finetune_drafter DIR VERIFIER DATA INIT UPDATES OUT: drafter INIT fine-tuned UPDATES updates on
  # VERIFIER's translations DATA (2 threads, the shipped drafter's settings) in DIR, the uniform average of its last 4
  # checkpoints (DIR-avg4.pt) exported --fp16 as OUT, once (a rerun resumes from DIR/checkpoint_last.pt).
  # FT_LR, FT_WARMUP_INIT_LR, FT_WARMUP: another learning rate (default a constant 1e-4; a falling one: init > lr)
  [ -s "$6" ] && return
  if [ ! -e "$1/finished" ]; then
    CPU=1 THREADS=2 SETTING=multi30k-drafter VERIFIER=$2 DATA=$3 SAVE_DIR=$1 MAX_UPDATE=$5 DROPOUT=0.0 LR=${FT_LR:-1e-4} \
      WARMUP_INIT_LR=${FT_WARMUP_INIT_LR:-1e-4} WARMUP=${FT_WARMUP:-10000} GLANCE_START=0.3 GLANCE_END=0.3 MAX_EPOCH=1000 KEEP_LAST_EPOCHS=1 \
      SAVE_INTERVAL_UPDATES=300 bash recipes/train-drafter.sh --finetune-from-model "$4" --validate-interval-updates 300 \
      --cpu-autocast bf16
    touch "$1/finished"
  fi
  python -m fairseq_plugins.scripts.average_checkpoints --inputs "$1" --num-update-checkpoints 4 \
    --checkpoint-upper-bound "$5" --output "${1%/}-avg4.pt"
  export_fp16 "${1%/}-avg4.pt" "$6"
}

export_fp16() {  # export_fp16 CHECKPOINT OUT: the inference-only float16 copy, once
  [ -s "$2" ] || python -m fairseq_plugins.scripts.export_checkpoint "$1" "$2" --fp16
}

harness() {  # harness VERIFIER DRAFTER DECODERS OUT_MD [OPTION...]: the harness on test2016 (batch 1, 1 thread), once
  [ -s "$4" ] && return
  local verifier=$1 drafter=$2 decoders=$3 out_md=$4
  shift 4
  python -m fairseq_plugins.bench.latency "$RUNS/multi30k/bin" --path "$verifier" --drafter-path "$drafter" \
    --source-lang en --target-lang de --remove-bpe sentencepiece --max-len-a 1.2 --max-len-b 10 --threads 1 \
    --decoders "$decoders" --out-md "$out_md" "$@"
}

bench_pair() {  # bench_pair DIR NAME VERIFIER DRAFTER DECODERS: one harness run on test2016 into DIR/bench/NAME.{md,json}, once
  mkdir -p "$1/bench"
  harness "$3" "$4" "$5" "$1/bench/$2.md" --profile --ct2-dir "$1/ct2-$2" --out-json "$1/bench/$2.json"
}
