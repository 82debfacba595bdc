#!/bin/sh
# braid-train at fp16 (loss scale and skipped steps in its JSON) and bf16, with activation
# recomputation, on thread ranks and under braidrun. Skipped (77) where Fashion-MNIST is absent.
#   training_braid_train_mixed_smoke.sh BRAID_TRAIN BRAIDRUN
train="$1"
braidrun="$2"
d=/usr/share/datasets/fashion-mnist
if [ ! -f "$d/train-images-idx3-ubyte.gz" ]; then echo "SKIP: $d is absent"; exit 77; fi
set -e
f=$(mktemp)
trap 'rm -f "$f"' EXIT
"$train" --dp 2 --zero 3 --precision fp16 --recompute --epochs 1 --max-steps 20 --json > "$f"
grep -q '"loss_scale"' "$f"
grep -q '"skipped_steps"' "$f"
"$train" --model vit --dp 2 --zero 2 --precision bf16 --recompute --epochs 1 --max-steps 5 \
  --json > "$f"
grep -q '"recompute":true' "$f"
"$braidrun" -n 2 -- "$train" --dp 2 --zero 1 --precision fp16 --epochs 1 --max-steps 20 \
  --json > "$f"
grep -q '^0: {.*"loss_scale"' "$f"
