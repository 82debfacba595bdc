#!/bin/sh
# braidrun and the flight recorder: 4 ranks (trace_test's "busy" role), rank 2 busy in its own
# code past the others' 2 s timeout. The others' failed calls dump and have braidrun send SIGUSR1
# to every rank: rank 2 dumps too, from its recorder's thread while it sleeps (reason "signal").
# braid-trace then names rank 2 as never having posted all_reduce #6.
#   braidrun_trace_signal.sh BRAIDRUN TRACE_TEST BRAID_TRACE
set -eu
braidrun=$1 trace_test=$2 braid_trace=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
BRAID_TRACE_DIR="$dir" BRAID_TRACE_JOB=busy BRAID_TIMEOUT=2 BRAID_STALL_WARN=0 \
  "$braidrun" -n 4 "$trace_test" --braid-child=busy >"$dir/run.log" 2>&1 || {
  cat "$dir/run.log"; echo "FAIL: braidrun exited non-zero"; exit 1; }
for r in 0 1 2 3; do
  [ -f "$dir/busy/rank-$r.json" ] || { cat "$dir/run.log"; echo "FAIL: no dump from rank $r"; exit 1; }
done
grep -q '"reason":"signal"' "$dir/busy/rank-2.json" || { echo "FAIL: rank 2's dump is not SIGUSR1's"; exit 1; }
out=$("$braid_trace" --no-timeline "$dir/busy")
echo "$out"
echo "$out" | grep -q "rank 2 never posted all_reduce #6" || { echo "FAIL: verdict"; exit 1; }
echo "PASS"
