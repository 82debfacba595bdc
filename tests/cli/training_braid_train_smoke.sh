#!/bin/sh
# braid-train end to end on a slice of Fashion-MNIST: the MLP with ZeRO 0 and 3 on 2 thread
# ranks, the ViT at bf16, and 2 braidrun processes; each run's JSON line reports its test
# accuracy (or model). Skipped (77) where the data set is absent.
#   training_braid_train_smoke.sh BRAID_TRAIN BRAIDRUN
. "$(dirname "$0")/braid_train_preamble.sh"
for z in 0 3; do
  "$train" --dp 2 --zero $z --epochs 1 --train-limit 4096 --json > "$f"
  grep -q '"test_accuracy"' "$f"
done
"$train" --model vit --dp 2 --zero 3 --precision bf16 --epochs 1 --max-steps 5 --json > "$f"
grep -q '"model":"vit"' "$f"
"$braidrun" -n 2 -- "$train" --dp 2 --zero 2 --epochs 1 --train-limit 2048 --json > "$f"
grep -q '^0: {.*"test_accuracy"' "$f"
