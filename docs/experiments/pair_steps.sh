# Shell functions shared by continued_verifier.sh and frozen_encoder_student.sh (sourced after they set RUNS).

previous_demo_pair() {  # previous_demo_pair DIR: the demo pair both experiments started from (git show 38b53bd)
  mkdir -p "$1"
  local f
  for f in verifier drafter; do [ -s "$1/$f.pt" ] || git show "38b53bd:checkpoints/demo/$f.pt" > "$1/$f.pt"; done
}

distil_sharded() {  # distil_sharded TEACHER INPUT OUTPUT: the teacher's greedy translations, one shard per core, once
  [ -s "$3" ] && return
  local shard options=(--teacher "$1" --data "$RUNS/multi30k/bin" --input "$2" --output "$3" --beam 1
                       --max-len-a 1.2 --max-len-b 10 --num-shards 2 --no-progress-bar)
  for shard in 0 1; do python -m fairseq_plugins.distill "${options[@]}" --shard-id $shard & done
  wait
  python -m fairseq_plugins.distill "${options[@]}" --merge-only
}
