#!/bin/sh
# braid-train's pipeline (GPipe, 1F1B), tensor and data parallelism on a slice of
# Fashion-MNIST, on thread ranks (each JSON line reports the bubble fraction) and as braidrun
# processes: a layout that does not match braidrun's 4 ranks exits 2, one that does trains.
# Skipped (77) where the data set is absent.
#   training_braid_train_parallel_smoke.sh BRAID_TRAIN BRAIDRUN
. "$(dirname "$0")/braid_train_preamble.sh"
for a in "--pp 2 --schedule gpipe --microbatches 4" "--tp 2" "--pp 2 --tp 2" \
  "--pp 2 --dp 2" "--model vit --pp 2" "--model vit --tp 2 --pp 2"; do
  # shellcheck disable=SC2086 # $a is several flags and their values
  "$train" $a --epochs 1 --max-steps 10 --json > "$f"
  grep -q '"bubble_fraction"' "$f"
done
set +e
"$braidrun" -n 4 -- "$train" --pp 3 --epochs 1 --max-steps 2 2> /dev/null
rc=$?
set -e
[ $rc -eq 2 ]
"$braidrun" -n 4 -- "$train" --pp 4 --schedule 1f1b --epochs 1 --train-limit 2048 --json > "$f"
grep -q '^0: {.*"test_accuracy"' "$f"
