#!/usr/bin/env bash
# Braid across emulated hosts (network namespaces, scripts/cluster.sh), with its peers
# measured in the same run:
#
#  1. 2 hosts x 2 ranks, every host link shaped to RATE (default 1gbit) with tc tbf:
#     all-reduce busbw at SIZE (default 64M) with the flat ring and with the hierarchical
#     algorithm, and their ratio.
#  2. 2 hosts x 1 rank, no rate limit: Braid's tcp transport (broadcast from rank 0: one
#     direction, as iperf3 measures; the in-place column, since out of place the root also
#     copies its send buffer into its receive buffer, a local copy that is no network
#     transfer) beside iperf3 between the same two namespaces, with as
#     many streams as Braid has sockets per peer (BRAID_NSOCKS_PERPEER, default 2), in
#     ROUNDS (default 3) alternating rounds; the medians are compared (this machine is noisy).
#
# Usage: perf/cluster_bench.sh [RATE=1gbit] [SIZE=64M]
# Env: BUILD_DIR (default build). Needs root (namespaces); exits 77 where it cannot run.
# The namespaces are removed on exit, whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${1:-1gbit}
SIZE=${2:-64M}
BUILD=${BUILD_DIR:-build}
NSOCKS=${BRAID_NSOCKS_PERPEER:-2}
ROUNDS=${ROUNDS:-3}
scripts/setup.sh "$BUILD" >/dev/null
command -v iperf3 >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3 >/dev/null
# One emulated cluster per machine: wait for a test run (tests/test_util.cc) that holds it.
exec 9>/run/lock/braid-cluster-session.lock
flock -w 600 9 || { echo "cluster_bench: the emulated cluster stayed busy for 10 minutes" >&2; exit 1; }
trap 'scripts/cluster.sh down >/dev/null 2>&1 || true' EXIT

# busbw (GB/s) of the out-of-place column of the last data row of an nccl-tests table.
busbw() { awk '$1 ~ /^[0-9]+$/ && NF >= 13 { b = $8 } END { print b }'; }
run() { "$BUILD/tools/braidrun" --no-prefix --hosts "$1" -- "${@:2}" | grep -v '^#  Rank'; }

scripts/cluster.sh up 2 --rate "$RATE" >/dev/null
echo "# 1. all-reduce, 2 hosts x 2 ranks, host links at $RATE, $SIZE float sum"
for algo in ring hierarchical; do
  out=$(run braid-h0:2,braid-h1:2 "$BUILD/perf/all_reduce_perf" -b "$SIZE" -e "$SIZE" \
    -n 5 -w 1 -A "$algo")
  echo "$out" | grep -E '^ +[0-9]' | sed "s/^/$algo: /"
  grep -q 'Out of bounds values : 0 OK' <<<"$out" || { echo "$algo: wrong values" >&2; exit 1; }
  declare "bw_$algo=$(echo "$out" | busbw)"
done
echo "ring busbw ${bw_ring} GB/s, hierarchical ${bw_hierarchical} GB/s, ratio $(
  awk -v h="$bw_hierarchical" -v r="$bw_ring" 'BEGIN { printf "%.2f", h / r }')"

scripts/cluster.sh up 2 >/dev/null
echo "# 2. one direction between 2 hosts, no rate limit, $SIZE; $ROUNDS alternating rounds"
iperf_bw() {
  ip netns exec braid-h1 iperf3 -s -D -1 -p 5201
  sleep 0.3
  ip netns exec braid-h0 iperf3 -c 10.77.0.2 -p 5201 -t 3 -P "$1" -J |
    awk -F'[:,]' '/"sum_received"/ { s = 1 } s && /"bits_per_second"/ { printf "%.3f", $2 / 8e9; exit }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
: >/tmp/braid-bench-braid; : >/tmp/braid-bench-iperf
for round in $(seq "$ROUNDS"); do
  out=$(run braid-h0:1,braid-h1:1 "$BUILD/perf/broadcast_perf" -b "$SIZE" -e "$SIZE" -n 10 -w 2)
  row=$(echo "$out" | grep -E '^ +[0-9]')
  echo "round $round braid tcp broadcast: $row"
  echo "$row" | awk '{ print $12 }' >>/tmp/braid-bench-braid
  bw=$(iperf_bw "$NSOCKS")
  echo "round $round iperf3 -P $NSOCKS: $bw GB/s"
  echo "$bw" >>/tmp/braid-bench-iperf
done
braid_bw=$(median </tmp/braid-bench-braid)
iperf_bw_med=$(median </tmp/braid-bench-iperf)
echo "median: braid tcp ${braid_bw} GB/s (in-place column), iperf3 -P $NSOCKS ${iperf_bw_med} GB/s;" \
  "braid / iperf3 = $(awk -v b="$braid_bw" -v i="$iperf_bw_med" 'BEGIN { printf "%.2f", b / i }')"
