# Multi30k test sets prepared for the shipped Multi30k models (checkpoints/demo's sentencepiece model and
# dictionaries, which the double-token pair shares); source it after common.sh:
#   . "$REPO/recipes/lib/demo_data.sh"; demo_test_data "$OUT_DIR" "test test1"   # -> OUT_DIR/data/bin
# Raw Multi30k (train, val, test_2016_flickr, test_2017_flickr .{en,de}, or the fairseq names train, valid, test,
# test1) from MULTI30K_DIR, else downloaded (not in DRY_RUN, which binarizes the first lines only). Done stages are
# skipped.
# shellcheck shell=bash
DEMO=${DEMO:-$REPO/checkpoints/demo}
MULTI30K_DIR=${MULTI30K_DIR:-$(dirname "$REPO")/shared/data/multi30k/raw}
MULTI30K_URL=${MULTI30K_URL:-https://github.com/multi30k/dataset/raw/master/data/task1/raw}

# demo_test_data OUT_DIR SPLITS: OUT_DIR/multi30k (links to the raw files, or downloads), OUT_DIR/data/bin
# (binarized with DEMO's sentencepiece model and dictionaries); SPLITS: test (test2016) and/or test1 (test2017)
demo_test_data() {
  local out=$1 splits=$2 split lang local_copy file
  declare -A official=([train]=train [valid]=val [test]=test_2016_flickr [test1]=test_2017_flickr)
  local raw=$out/multi30k
  mkdir -p "$raw"
  for split in train valid $splits; do
    [ -n "${official[$split]:-}" ] || die "TEST_SPLITS: $split is not a Multi30k test set (test = test2016, test1 = test2017)"
    for lang in en de; do
      all_exist "$raw/$split.$lang" && continue
      local_copy=$MULTI30K_DIR/${official[$split]}.$lang
      if [ ! -s "$local_copy" ] && [ -s "$MULTI30K_DIR/$split.$lang" ]; then local_copy=$MULTI30K_DIR/$split.$lang; fi
      file=$(local_or_fetch "$local_copy" "$MULTI30K_URL/${official[$split]}.$lang.gz" \
        "$out/download/${official[$split]}.$lang" gz)
      ln -sf "$(abspath "$file")" "$raw/$split.$lang"
    done
  done
  RAW=$raw SPM_MODEL=$DEMO/sentencepiece.model DICT_DIR=$DEMO SRC=en TGT=de TEST_SPLITS=$splits \
    OUT_DIR=$out/data bash "$REPO/recipes/data/prepare-with-model.sh"
}
