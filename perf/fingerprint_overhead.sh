#!/usr/bin/env bash
# BRAID_CALL_CHECK's cost (issue 38): all-reduce time with count-0 fingerprints off (A,
# BRAID_CALL_CHECK=0, NCCL's silent no-op) and on (B, the default), on one build, alternating
# runs in one go (perf/compare_builds.sh), at 8 B (latency) and 1 MiB, for each rank count. Only
# a count-0 call exchanges a fingerprint, so a call with data should cost the same: B/A is
# busbw, 1.000 no cost, 0.980 a 2% one. With the check on, each rank also keeps its call's record
# (one store per call in a loop of one shape) for its peers to ask. Each rank count is measured
# twice more as controls: the order swapped (B first is A) and A against A (both on), whose
# distance from 1.000 is the noise of that row on this machine (ranks beyond the cores sleep
# and wake on each other: at 4-8 ranks on 2 cores the control moves by up to 30%).
#   perf/fingerprint_overhead.sh [BUILD (default build)] [ROUNDS (default 7)] [RANKS... (default 1 2 4 8)]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
rounds="${2:-7}"
shift $(($# > 2 ? 2 : $#))
ranks=("$@")
[ ${#ranks[@]} -gt 0 ] || ranks=(1 2 4 8)
for n in "${ranks[@]}"; do
  for size in 8 1M; do
    iters=2000
    [ "$size" = 1M ] && iters=200
    for pair in "0 1" "1 0" "1 1"; do
      read -r a b <<<"$pair"
      A_ENV="BRAID_CALL_CHECK=$a" B_ENV="BRAID_CALL_CHECK=$b" NRANKS="$n" \
        perf/compare_builds.sh "$build" "$build" "$rounds" -- -b "$size" -e "$size" -n "$iters" -w 50
    done
  done
done
