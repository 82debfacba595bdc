#!/bin/sh
# Produces the figures of docs/training_moe_ps.md on 4 ranks (braidrun processes): the ViT
# with mixture-of-experts blocks at ep 4 and ep 2 (with the dense ViT beside it), its
# all-to-all-v bytes per step against 4 x tokens x top-k x dim x 4 B, and the parameter
# server (1 server, 3 workers; BSP and SSP s=2) against all-reduce DDP on the same MLP, global
# batch and epochs. Prints markdown tables.
# usage: tools/braid_train/moe_ps_report.sh BUILD_DIR [EPOCHS [moe|ps|all]]
set -eu
B=${1:?usage: $0 BUILD_DIR [EPOCHS [moe|ps|all]]}
EPOCHS=${2:-5}
PART=${3:-all}
case "$PART" in moe | ps | all) ;; *) echo "$0: part '$PART': expected moe, ps or all" >&2; exit 2 ;; esac
TRAIN="$B/tools/braid-train"
RUN="$B/tools/braidrun"
[ -x "$TRAIN" ] || { echo "$0: $TRAIN not built" >&2; exit 2; }
[ -x "$RUN" ] || { echo "$0: $RUN not built" >&2; exit 2; }
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# One run on 4 ranks: NAME FLAGS... -> $OUT/NAME.json (rank 0's JSON lines)
run() {
  name=$1; shift
  "$RUN" -n 4 -- "$TRAIN" --json --epochs "$EPOCHS" "$@" > "$OUT/$name.out"
  sed 's/^[0-9]*: //' "$OUT/$name.out" | grep '^{' > "$OUT/$name.json" || true
  [ "$(wc -l < "$OUT/$name.json")" -eq "$EPOCHS" ] ||
    { echo "$0: braid-train $* did not print $EPOCHS epochs" >&2; exit 1; }
}

# NAME LABEL -> one table row: accuracy per epoch, last loss, samples/s, and the MoE figures
row() {
  python3 - "$OUT/$1.json" "$2" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
last = rows[-1]
acc = ' '.join('%.4f' % r['test_accuracy'] for r in rows)
cells = [sys.argv[2], acc, '%.4f' % last['loss'], '%.0f' % last['samples_per_s']]
if 'alltoall_bytes_per_rank_step' in last:
    cells += ['%.2f%%' % (100 * last['moe_dropped_fraction']),
              '%.0f' % last['alltoall_bytes_per_rank_step'],
              '%.0f' % last['alltoall_bytes_formula']]
elif 'pulls_per_worker_step' in last:
    cells += ['%.0f' % last['push_bytes_per_worker_step'], '%.3f' % last['pulls_per_worker_step']]
elif sys.argv[2].startswith('vit'):  # dense: nothing routed
    cells += ['', '', '']
else:
    cells += ['%.0f' % last['comm_bytes_per_step'], '']
print('| ' + ' | '.join(cells) + ' |')
PY
}

if [ "$PART" != ps ]; then
echo "### ViT-MoE on 4 ranks (braidrun -n 4 braid-train --model vit-moe --ep EP --epochs $EPOCHS)"
echo
echo "| run | test accuracy per epoch | final loss | samples/s | dropped | all-to-all-v B/rank/step | 4 T k d 4 B x layers |"
echo "|---|---|---:|---:|---:|---:|---:|"
run vit --model vit --dp 4
row vit "vit (dense), dp 4"
for flags in "--ep 4" "--ep 2" "--ep 4 --topk 2" "--ep 4 --capacity 4"; do
  name=$(echo "moe $flags" | tr -c 'a-z0-9\n' '_')
  run "$name" --model vit-moe --dp 4 $flags
  row "$name" "vit-moe $flags"
done
echo
fi
[ "$PART" = moe ] && exit 0
echo "### Parameter server vs DDP on 4 ranks (MLP 784-256-128-10, AdamW, global batch 120, $EPOCHS epochs)"
echo
echo "| run | test accuracy per epoch | final loss | samples/s | bytes/step (DDP: all-reduced; PS: pushed per worker) | pulls per worker step |"
echo "|---|---|---:|---:|---:|---:|"
run ddp --dp 4 --batch-size 120
row ddp "DDP, 4 ranks"
run bsp --dp 4 --batch-size 120 --ps-servers 1
row bsp "PS BSP, 1 server + 3 workers"
run ssp --dp 4 --batch-size 120 --ps-servers 1 --staleness 2
row ssp "PS SSP s=2, 1 server + 3 workers"
run bsp2 --dp 4 --batch-size 120 --ps-servers 2
row bsp2 "PS BSP, 2 servers + 2 workers"
