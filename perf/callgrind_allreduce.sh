#!/usr/bin/env bash
# The instruction count of one small all-reduce on Braid's fast path (issue: host
# performance): 2 ranks as processes on this host (braidrun); rank 0 runs under callgrind,
# collecting only inside braidAllReduce and not while the executor waits for its peer (a
# count of waiting says how long the peer took, not what the call costs), over ITERS
# iterations (2 x ITERS calls) of BYTES bytes (float sum); rank 1 runs natively. Prints the
# instructions per call and the functions that take most of them.
#
# Usage: perf/callgrind_allreduce.sh [BYTES=8] [ITERS=1000]
# Env: BUILD_DIR (default build), OUT (default $BUILD_DIR/callgrind).
set -euo pipefail
cd "$(dirname "$0")/.."
BYTES=${1:-8}
ITERS=${2:-1000}
BUILD=${BUILD_DIR:-build}
OUT=${OUT:-$BUILD/callgrind}
fail() { echo "callgrind_allreduce: $1" >&2; exit "${2:-2}"; }
[[ "$BYTES" =~ ^[0-9]+[KMGkmg]?$ ]] || fail "BYTES '$BYTES' is not a size in bytes (like 8, 64K)"
[[ "$ITERS" =~ ^[0-9]+$ ]] && ((ITERS >= 1)) || fail "ITERS '$ITERS' must be an integer of at least 1"
scripts/setup.sh "$BUILD" >/dev/null
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
command -v valgrind >/dev/null ||
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends valgrind >/dev/null
mkdir -p "$OUT"
rm -f "$OUT"/callgrind.out.*
# Two runs, of ITERS and 2 x ITERS timed iterations (-c 0: no checks, whose own all-reduces
# would be counted; -w 1: a few untimed warm-up calls, which compile the plan).
# all_reduce_perf times each size out of place and then in place, so an iteration is two
# calls: the runs' difference over 2 x ITERS is the cost of one call, free of the fixed costs
# (plan compilation, the harness's reports). Before commit 1c56712 this divided by ITERS, and
# so printed twice the cost.
count() {  # ITERS -> instructions inside braidAllReduce on rank 0
  rm -f "$OUT"/callgrind.out.*
  "$BUILD/tools/braidrun" -n 2 --no-prefix -- sh -c '
    if [ "$BRAID_RANK" = 0 ]; then
      exec valgrind --tool=callgrind --callgrind-out-file='"$OUT"'/callgrind.out.%p \
        --collect-atstart=no --toggle-collect=braidAllReduce \
        --toggle-collect="*waitForProgress*" "$@"
    else
      exec "$@"
    fi' sh "$BUILD/perf/all_reduce_perf" -b "$BYTES" -e "$BYTES" -n "$1" -w 1 -c 0 \
    >"$OUT/perf.txt" 2>"$OUT/valgrind.txt" || return 1
  file=$(ls "$OUT"/callgrind.out.* 2>/dev/null | head -1)
  [ -n "$file" ] || return 1
  callgrind_annotate "$file" >"$OUT/annotate-$1.txt" 2>/dev/null
  awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}' "$OUT/annotate-$1.txt"
}
counted() {  # ITERS -> the count, or the run's own messages and exit 1
  local n
  n=$(count "$1") || true
  if ! [[ "$n" =~ ^[0-9]+$ ]]; then
    echo "callgrind_allreduce: the run of $1 iterations failed; its messages:" >&2
    grep -v '^==' "$OUT/valgrind.txt" | tail -5 >&2
    exit 1
  fi
  echo "$n"
}
one=$(counted "$ITERS")
two=$(counted $((2 * ITERS)))
echo "# callgrind: rank 0 of 2 processes (braidrun), all-reduce of $BYTES bytes, float sum;"
echo "# collected inside braidAllReduce, outside the executor's waiting for its peer"
echo "# (Run::waitForProgress: spinning, yielding and sleeping until a pass moves something)"
echo "# instructions: $one with $ITERS iterations, $two with $((2 * ITERS)) (each iteration"
echo "# is two calls, out of place and in place)"
echo "# per call: $(( (two - one) / (2 * ITERS) )) instructions"
echo "# the functions with most instructions of their own per call (the runs' difference):"
# Each function's count in both annotations; the difference over 2 x ITERS calls leaves out
# what runs once (plan compilation, the harness's reports).
python3 - "$OUT/annotate-$ITERS.txt" "$OUT/annotate-$((2 * ITERS)).txt" "$ITERS" <<'PY'
import re, sys
def counts(path):
    d = {}
    for line in open(path):
        m = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+(\S.*)", line)
        if m and ":" in m.group(2):
            d[m.group(2)] = int(m.group(1).replace(",", ""))
    return d
one, two, calls = counts(sys.argv[1]), counts(sys.argv[2]), 2 * int(sys.argv[3])
per = sorted(((two[f] - one.get(f, 0)) / calls, f) for f in two)
for v, f in reversed(per[-15:]):
    if v >= 1:
        print(f"{v:8.1f}  {f[:150]}")
PY
echo "# annotations: $OUT/annotate-*.txt"
