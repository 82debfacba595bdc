#!/bin/sh
# braid-train at fp16 (loss scale and skipped steps in its JSON) and bf16, with activation
# recomputation, on thread ranks and under braidrun. Skipped (77) where Fashion-MNIST is absent.
#   training_braid_train_mixed_smoke.sh BRAID_TRAIN BRAIDRUN
. "$(dirname "$0")/braid_train_preamble.sh"
"$train" --dp 2 --zero 3 --precision fp16 --recompute --epochs 1 --max-steps 20 --json > "$f"
grep -q '"loss_scale"' "$f"
grep -q '"skipped_steps"' "$f"
"$train" --model vit --dp 2 --zero 2 --precision bf16 --recompute --epochs 1 --max-steps 5 \
  --json > "$f"
grep -q '"recompute":true' "$f"
"$braidrun" -n 2 -- "$train" --dp 2 --zero 1 --precision fp16 --epochs 1 --max-steps 20 \
  --json > "$f"
grep -q '^0: {.*"loss_scale"' "$f"
