#!/bin/sh
# braid-tune end to end on 3 thread ranks: calibrate; tune with the calibration (the TUNING
# log names the file, and the regret line is printed), a JSON table with every field; then
# all_reduce_perf with that table (BRAID_TUNE_TABLE) picks what was measured fastest.
#   braid_tune_smoke.sh BRAID_TUNE ALL_REDUCE_PERF
tune="$1"
perf="$2"
set -e
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$tune" -t 3 --calibrate "$d/cal.txt" >/dev/null
grep -q "^intra_bw_gbs = " "$d/cal.txt"
BRAID_TUNE_FILE="$d/cal.txt" BRAID_DEBUG=INFO BRAID_DEBUG_SUBSYS=TUNING "$tune" -t 3 \
  -b 1K -e 64K -f 8 --collective all --json "$d/t.json" > "$d/out.txt" 2>&1
grep -q "calibration from BRAID_TUNE_FILE" "$d/out.txt"
grep -q "regret <= 1.10 at" "$d/out.txt"
for k in collective bytes chosen best regret measured_us predicted_us; do
  grep -q "\"$k\"" "$d/t.json"
done
BRAID_TUNE_TABLE="$d/t.json" BRAID_DEBUG=INFO BRAID_DEBUG_SUBSYS=TUNING "$perf" -t 3 \
  -b 1K -e 64K -f 8 > "$d/ar.txt" 2>&1
grep -q "(measured fastest at" "$d/ar.txt"
