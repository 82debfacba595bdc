#!/bin/sh
# braid-train's parallelism flags (--pp, --tp, --schedule, --microbatches, --ep, --topk,
# --capacity, --staleness, --moe-experts, --ps-servers) refuse bad values and layouts that do
# not fit: each exits 2 with a message naming the flag.
#   training_braid_train_parallel_bad_flags.sh BRAID_TRAIN
train="$1"
e=$(mktemp)
trap 'rm -f "$e"' EXIT
for a in "--pp 0" "--tp x" "--schedule pipedream" "--microbatches 0" \
  "--tp 3" "--pp 9" "--tp 3 --model vit" "--pp 2 --zero 1" "--ep 2" "--topk 3" \
  "--capacity 0" "--staleness 2" "--moe-experts 3 --model vit-moe --ep 2 --dp 2" \
  "--ps-servers 4 --dp 4" "--ps-servers 1 --zero 1" "--ep 3 --model vit-moe --dp 4" \
  "--model vit-moe --zero 2" "--ps-servers 1 --dp 4 --batch-size 128" \
  "--topk 2 --model vit"; do
  # shellcheck disable=SC2086 # $a is one or more flags and their values
  "$train" $a --data /nonexistent 2> "$e"
  rc=$?
  if [ $rc -ne 2 ]; then echo "$a: exit $rc, not 2"; exit 1; fi
  f=${a%% *}
  grep -q -- "$f" "$e" || { echo "$a: message does not name $f"; exit 1; }
done
echo ok
