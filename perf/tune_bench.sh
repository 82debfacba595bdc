#!/usr/bin/env bash
# The selector judged against measurement (issue: "choosing the algorithm"), in one run:
#
#  1. RANKS (default 4) ranks on this host, started by braidrun;
#  2. 2 emulated hosts x 2 ranks (scripts/cluster.sh), host links shaped to RATE (1gbit).
#
# Each: braid-tune --calibrate measures the link figures, then braid-tune with
# BRAID_TUNE_FILE measures every algorithm of all-reduce, all-gather, reduce-scatter and
# broadcast from MIN to MAX bytes (8 .. 256M, x2; each algorithm's time the median of its
# rounds, every algorithm of a size timed in interleaved rounds: braid-tune --rounds, default
# 5) and prints, per collective, the share of
# sizes where the selector's regret (its choice's measured time / the best measured) is at
# most 1.10, and per algorithm the median |predicted/measured - 1| at >= 64 KiB. Tables,
# JSON and PNG plots go to OUT (default tune-results/).
#
# Usage: perf/tune_bench.sh [local|cluster|both] [MIN] [MAX]
# Env: BUILD_DIR (default build), RANKS, RATE, OUT. The cluster part needs root (namespaces)
# and is skipped with a message where it cannot run; namespaces are removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
WHAT=${1:-both}
MIN=${2:-8}
MAX=${3:-256M}
BUILD=${BUILD_DIR:-build}
RANKS=${RANKS:-4}
RATE=${RATE:-1gbit}
OUT=${OUT:-tune-results}
scripts/setup.sh "$BUILD" >/dev/null
command -v gnuplot >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnuplot-nox >/dev/null 2>&1 || true
mkdir -p "$OUT"
OUT_ABS=$(cd "$OUT" && pwd)  # OUT may be relative (to the repository) or absolute
tune() {  # NAME LAUNCH...
  local name=$1; shift
  echo "# $name: calibrating"
  "$@" "$BUILD/tools/braid-tune" --calibrate "$OUT/$name-calibration.txt" | sed 's/^/#   /'
  echo "# $name: tuning $MIN .. $MAX"
  BRAID_TUNE_FILE=$OUT_ABS/$name-calibration.txt "$@" "$BUILD/tools/braid-tune" -b "$MIN" -e "$MAX" -f 2 -w 1 \
    --json "$OUT/$name.json" --png "$OUT/$name.png" | tee "$OUT/$name.txt" | grep '^#'
}
if [[ $WHAT == local || $WHAT == both ]]; then
  tune "local-$RANKS" "$BUILD/tools/braidrun" --no-prefix -n "$RANKS" --
fi
if [[ $WHAT == cluster || $WHAT == both ]]; then
  if [[ $(id -u) -ne 0 ]] || ! ip netns list >/dev/null 2>&1; then
    echo "# cluster: skipped (needs root and network namespaces)"
    exit 0
  fi
  exec 9>/run/lock/braid-cluster-session.lock
  flock -w 600 9 || { echo "tune_bench: the emulated cluster stayed busy for 10 minutes" >&2; exit 1; }
  trap 'scripts/cluster.sh down >/dev/null 2>&1 || true' EXIT
  scripts/cluster.sh up 2 --rate "$RATE" >/dev/null
  tune "cluster-2x2-$RATE" "$BUILD/tools/braidrun" --no-prefix --hosts braid-h0:2,braid-h1:2 --
fi
