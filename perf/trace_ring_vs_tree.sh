#!/usr/bin/env bash
# Where the time goes, ring against tree (issue 36): all_reduce_perf on an emulated 2-host
# cluster (scripts/cluster.sh, 2 ranks a host, links shaped to RATE) at one size, once per
# algorithm, each recorded step by step (-X: BRAID_TRACE=steps); then braid-trace on each run:
# its summary (wait / copy / reduce per step kind), its timeline (timeline.json, for Perfetto)
# and a Gantt chart of one call across the ranks (gantt.png, through gnuplot).
#   sudo perf/trace_ring_vs_tree.sh [OUT (default /tmp/braid-ring-vs-tree)] [SIZE (4M)] [RATE (1gbit)]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/braid-ring-vs-tree}"
size="${2:-4M}"
rate="${3:-1gbit}"
build="${BUILD:-build}"
rm -rf "$out"
mkdir -p "$out"
trap 'scripts/cluster.sh down >/dev/null' EXIT
scripts/cluster.sh up 2 --rate "$rate" >/dev/null
for algo in ring tree; do
  "$build/tools/braidrun" --hosts braid-h0:2,braid-h1:2 "$build/perf/all_reduce_perf" \
    -b "$size" -e "$size" -n 5 -w 2 -c 0 -A "$algo" -X "$out/$algo" | grep -E "^ +[0-9]|trace:"
  job="$(ls -d "$out/$algo"/*/ | head -1)"
  mv "$job" "$out/$algo.run" && rmdir "$out/$algo"
  echo "== $algo"
  # The chart shows the last call of the size (the run's own checks come after it).
  call="$(python3 - "$out/$algo.run/rank-0.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c = [c for c in d["calls"] if c["call"] == "all_reduce" and c["algo"] not in ("", "recursive_doubling")][-1]
print(f'{c["comm"]}:{c["seq"]}')
PY
)"
  "$build/tools/braid-trace" --png "$out/$algo.run/gantt.png" --call "$call" "$out/$algo.run" |
    sed -n '/^Summary/,/^Timeline/p'
done
