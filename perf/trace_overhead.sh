#!/usr/bin/env bash
# The flight recorder's cost (issue 36; braid_trace.h): all-reduce time with BRAID_TRACE=off (A)
# and with the default, BRAID_TRACE=calls (B), on one build, alternating runs in one go
# (perf/compare_builds.sh), at 8 B (latency: the recorder's few stores and two clock reads a
# call) and 1 MiB, for each rank count. B/A is busbw: 1.000 is no cost, 0.980 a 2% one.
#   perf/trace_overhead.sh [BUILD (default build)] [ROUNDS (default 7)] [RANKS... (default 2 4 8)]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
rounds="${2:-7}"
shift $(($# > 2 ? 2 : $#))
ranks=("$@")
[ ${#ranks[@]} -gt 0 ] || ranks=(2 4 8)
for n in "${ranks[@]}"; do
  for size in 8 1M; do
    iters=2000
    [ "$size" = 1M ] && iters=200
    A_ENV="BRAID_TRACE=off" B_ENV="BRAID_TRACE=calls" NRANKS="$n" \
      perf/compare_builds.sh "$build" "$build" "$rounds" -- -b "$size" -e "$size" -n "$iters" -w 50
  done
done
