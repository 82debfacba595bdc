#!/usr/bin/env bash
# Algorithms of one collective side by side, measured in one run: a perf binary under braidrun
# with -A ALGO for each algorithm in turn, ROUNDS times (ALGO1, ALGO2, ..., ALGO1, ...), then
# one table: size, each algorithm's median out-of-place time (us), and which is fastest. For
# deciding whether an algorithm earns its place in the table (issue 32's linear all-gather).
#   perf/compare_algorithms.sh BINARY NRANKS ALGO[,ALGO...] [ROUNDS (default 5)] [-- FLAGS]
# BINARY is a perf binary's name (all_gather_perf); BUILD_DIR (default build) holds it.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 BINARY NRANKS ALGO[,ALGO...] [ROUNDS] [-- FLAGS]" >&2; exit 2; }
build=${BUILD_DIR:-build}
name="$1" nranks="$2"
bin="$build/perf/$name"
IFS=, read -r -a algos <<<"$3"
shift 3
rounds=5
if [ $# -gt 0 ] && [ "$1" != -- ]; then rounds="$1"; shift; fi
[ "${1:-}" = -- ] && shift
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(-b 8 -e 1M -f 2 -n 50 -w 5)
for f in "$bin" "$build/tools/braidrun"; do
  [ -x "$f" ] || { echo "$0: $f is not built" >&2; exit 2; }
done
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
for ((r = 0; r < rounds; r++)); do
  for a in "${algos[@]}"; do
    "$build/tools/braidrun" -n "$nranks" --no-prefix "$bin" -A "$a" "${flags[@]}" >"$out/$a.$r"
  done
done
python3 - "$out" "$rounds" "$nranks" "$name" "${algos[@]}" <<'PY'
import os, statistics, sys
out, rounds, nranks, binary, algos = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
med = {}
for a in algos:
    rows = {}
    for r in range(rounds):
        for line in open(os.path.join(out, f"{a}.{r}")):
            f = line.split()
            if len(f) >= 8 and f[0].isdigit():  # size count type redop root time algbw busbw
                rows.setdefault(int(f[0]), []).append(float(f[5]))
    med[a] = {s: statistics.median(v) for s, v in rows.items()}
print(f"# {binary}, {nranks} ranks: median out-of-place time (us) of {rounds} runs each, "
      "alternating")
print(f"{'size (B)':>12} " + " ".join(f"{a:>18}" for a in algos) + "  fastest")
for s in sorted(med[algos[0]]):
    ts = [med[a].get(s, float("nan")) for a in algos]
    best = algos[min(range(len(ts)), key=lambda i: ts[i])]
    print(f"{s:>12} " + " ".join(f"{t:>18.2f}" for t in ts) + f"  {best}")
PY
