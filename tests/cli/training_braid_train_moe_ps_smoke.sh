#!/bin/sh
# braid-train's vit-moe with expert parallelism inside data parallelism (threads, then 4
# braidrun processes), and the parameter server under BSP and SSP (3 processes), a few steps
# each: their JSON lines carry their own keys. Skipped (77) where Fashion-MNIST is absent.
#   training_braid_train_moe_ps_smoke.sh BRAID_TRAIN BRAIDRUN
. "$(dirname "$0")/braid_train_preamble.sh"
"$train" --model vit-moe --dp 4 --ep 2 --topk 2 --epochs 1 --max-steps 5 --json > "$f"
grep -q '"alltoall_bytes_per_rank_step"' "$f"
"$braidrun" -n 4 -- "$train" --model vit-moe --ep 4 --epochs 1 --max-steps 5 --json > "$f"
grep -q '^0: {.*"moe_dropped_fraction"' "$f"
for s in 0 2; do
  "$braidrun" -n 3 -- "$train" --ps-servers 1 --staleness $s --batch-size 64 \
    --epochs 1 --max-steps 10 --json > "$f"
  grep -q '^0: {.*"pulls_per_worker_step"' "$f"
done
