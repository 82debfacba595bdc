#!/bin/sh
# Produces the figures of docs/training.md: accuracy per ZeRO stage and rank count, per-rank
# memory against the ZeRO paper's formulas, communication volume per step, mixed precision
# (bf16, fp16 with loss scaling), activation memory with and without recomputation, and step
# time with and without overlapping the gradient collectives with backward. Prints markdown
# tables.
# usage: tools/braid_train/training_report.sh BUILD_DIR [EPOCHS]
set -eu
B=${1:?usage: $0 BUILD_DIR [EPOCHS]}
EPOCHS=${2:-8}
TRAIN="$B/tools/braid-train"
RUN="$B/tools/braidrun"
[ -x "$TRAIN" ] || { echo "$0: $TRAIN not built" >&2; exit 2; }
[ -x "$RUN" ] || { echo "$0: $RUN not built" >&2; exit 2; }
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# One run: dp zero extra-flags -> last JSON line in $OUT/last.json
run() {
  dp=$1; zero=$2; shift 2
  "$RUN" -n "$dp" -- "$TRAIN" --dp "$dp" --zero "$zero" --json "$@" | sed 's/^[0-9]*: //' \
    > "$OUT/run.json"
  tail -n 1 "$OUT/run.json" > "$OUT/last.json"
}

echo "### Accuracy (braidrun -n DP braid-train --dp DP --zero Z --epochs $EPOCHS, AdamW, global batch 128)"
echo
echo "| dp | zero | test accuracy per epoch | final loss | samples/s | comm fraction |"
echo "|---:|---:|---|---:|---:|---:|"
for dp in 1 2 4; do
  for zero in 0 1 2 3; do
    [ "$dp" = 1 ] && [ "$zero" != 0 ] && continue
    run "$dp" "$zero" --epochs "$EPOCHS"
    cp "$OUT/run.json" "$OUT/acc_${dp}_${zero}.json"
    python3 - "$OUT/run.json" "$dp" "$zero" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
acc = ' '.join('%.4f' % r['test_accuracy'] for r in rows)
last = rows[-1]
print('| %s | %s | %s | %.4f | %.0f | %.2f |' % (sys.argv[2], sys.argv[3], acc, last['loss'],
      last['samples_per_s'], last['comm_fraction']))
PY
  done
done
echo
echo "### Per-rank memory and communication volume (dp 4, AdamW, fp32; psi = 235,146)"
echo
echo "| zero | params B (formula) | grads B (formula) | optimizer B (formula) | total B (formula) | bytes/step (formula) |"
echo "|---:|---:|---:|---:|---:|---:|"
for zero in 0 1 2 3; do
  python3 - "$OUT/acc_4_${zero}.json" "$zero" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')][-1]
z, psi, n = int(sys.argv[2]), r['psi'], r['dp']
p = 4 * psi // (n if z >= 3 else 1)
g = 4 * psi // (n if z >= 2 else 1)
s = 8 * psi // (n if z >= 1 else 1)
v = (3 if z == 3 else 2) * psi * 4
print('| %d | %d (%d) | %d (%d) | %d (%d) | %d (%d) | %d (%s psi x 4 B = %d) |' % (
    z, r['param_bytes'], p, r['grad_bytes'], g, r['optim_bytes'], s,
    r['param_bytes'] + r['grad_bytes'] + r['optim_bytes'], p + g + s,
    r['comm_bytes_per_step'], 3 if z == 3 else 2, v))
PY
done
echo
echo "### Mixed precision (dp 4, zero 2, --precision P, --epochs $EPOCHS)"
echo
echo "| precision | test accuracy per epoch | final loss | loss scale per epoch | skipped steps | bytes/step |"
echo "|---|---|---:|---|---:|---:|"
for prec in bf16 fp16; do
  run 4 2 --epochs "$EPOCHS" --precision "$prec"
  python3 - "$OUT/run.json" "$prec" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
print('| %s | %s | %.4f | %s | %d | %d |' % (sys.argv[2],
      ' '.join('%.4f' % r['test_accuracy'] for r in rows), rows[-1]['loss'],
      ' '.join('%g' % r['loss_scale'] for r in rows), sum(r['skipped_steps'] for r in rows),
      rows[-1]['comm_bytes_per_step']))
PY
done
echo
echo "### Activation memory (dp 1, bf16, batch 128, 3 steps)"
echo
echo "| model | activation B without | with --recompute | peak during backward with it |"
echo "|---|---:|---:|---:|"
for model in mlp vit; do
  "$TRAIN" --model "$model" --dp 1 --precision bf16 --epochs 1 --max-steps 3 --json \
    > "$OUT/act_off.json"
  "$TRAIN" --model "$model" --dp 1 --precision bf16 --epochs 1 --max-steps 3 --json \
    --recompute > "$OUT/act_on.json"
  python3 - "$OUT/act_off.json" "$OUT/act_on.json" "$model" <<'PY'
import json, sys
off = json.loads(open(sys.argv[1]).read().splitlines()[-1])
on = json.loads(open(sys.argv[2]).read().splitlines()[-1])
print('| %s | %d | %d | %d |' % (sys.argv[3], off['activation_bytes'], on['activation_bytes'],
      on['peak_backward_activation_bytes']))
PY
done
echo
echo "### Overlap (zero 0, global batch 1024, buckets 64 KiB first / 256 KiB, 200 steps; median of 3)"
echo
echo "| dp | step ms, overlapped | step ms, after backward | comm fraction overlapped / not |"
echo "|---:|---:|---:|---:|"
for dp in 2 4; do
  : > "$OUT/ov_on"; : > "$OUT/ov_off"
  for rep in 1 2 3; do
    run "$dp" 0 --epochs 1 --max-steps 200 --batch-size 1024 --first-bucket-mb 0.0625 \
      --bucket-cap-mb 0.25
    cat "$OUT/last.json" >> "$OUT/ov_on"
    run "$dp" 0 --epochs 1 --max-steps 200 --batch-size 1024 --first-bucket-mb 0.0625 \
      --bucket-cap-mb 0.25 --no-overlap
    cat "$OUT/last.json" >> "$OUT/ov_off"
  done
  python3 - "$OUT/ov_on" "$OUT/ov_off" "$dp" <<'PY'
import json, statistics, sys
on = [json.loads(l) for l in open(sys.argv[1])]
off = [json.loads(l) for l in open(sys.argv[2])]
med = lambda rs, k: statistics.median(r[k] for r in rs)
print('| %s | %.2f | %.2f | %.2f / %.2f |' % (sys.argv[3], med(on, 'step_ms'), med(off, 'step_ms'),
      med(on, 'comm_fraction'), med(off, 'comm_fraction')))
PY
done
