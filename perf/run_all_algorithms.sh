#!/usr/bin/env bash
# Every perf binary with every algorithm that implements its collective (`-A list`), as
# processes launched by braidrun (oversubscribed on small machines), at each rank count.
# Exits non-zero if any run fails or reports a wrong value.
# Usage: perf/run_all_algorithms.sh [NRANKS...]   (default: 2 3 5 8)
# Env: BUILD_DIR (default build), SIZES (default "-b 8 -e 4M -f 4").
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD_DIR:-build}
SIZES=${SIZES:--b 8 -e 4M -f 4}
RANKS=("$@")
[ ${#RANKS[@]} -eq 0 ] && RANKS=(2 3 5 8)
scripts/setup.sh "$BUILD" || exit 1
fails=0 runs=0
printf '%-22s %-20s %6s %s\n' binary algorithm nranks result
for bin in "$BUILD"/perf/*_perf; do
  name=$(basename "$bin")
  algos=$("$bin" -A list)
  [ -z "$algos" ] && algos=auto
  for algo in $algos; do
    for n in "${RANKS[@]}"; do
      runs=$((runs + 1))
      # shellcheck disable=SC2086
      out=$(timeout 300 "$BUILD/tools/braidrun" -n "$n" --no-prefix "$bin" -A "$algo" $SIZES -n 2 -w 1 2>&1)
      rc=$?
      if [ "$name" = sendrecv_perf ] || [ "$name" = hypercube_perf ]; then
        out=$(timeout 300 "$BUILD/tools/braidrun" -n "$n" --no-prefix "$bin" $SIZES -n 2 -w 1 2>&1); rc=$?
      fi
      if [ $rc -eq 0 ] && { grep -q 'Out of bounds values : 0 OK' <<<"$out" || grep -q 'skipping' <<<"$out"; }; then
        result=ok
      else
        result="FAILED (exit $rc)"
        fails=$((fails + 1))
      fi
      printf '%-22s %-20s %6s %s\n' "$name" "$algo" "$n" "$result"
    done
  done
done
echo "$((runs - fails)) passed, $fails failed"
[ $fails -eq 0 ]
