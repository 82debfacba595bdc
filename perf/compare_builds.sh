#!/usr/bin/env bash
# Bus bandwidth of two builds of Braid side by side, measured in one run: all_reduce_perf on 2
# processes (braidrun -n 2), 8 B to 256 MiB by doubling, each build ROUNDS times in turn (A, B,
# A, B, ...), then one table: size, each build's median out-of-place time (us) and busbw
# (GB/s), and B's busbw over A's. For refactors that must not move performance (issue 32), and,
# with one build twice and A_ENV / B_ENV, for a setting's cost (perf/trace_overhead.sh).
#   [A_ENV="VAR=value ..."] [B_ENV=...] [NRANKS=2] \
#     perf/compare_builds.sh BUILD_A BUILD_B [ROUNDS (default 3)] [-- all_reduce_perf flags]
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 BUILD_A BUILD_B [ROUNDS] [-- FLAGS]" >&2; exit 2; }
a="$1" b="$2"
shift 2
rounds=3
if [ $# -gt 0 ] && [ "$1" != -- ]; then rounds="$1"; shift; fi
[ "${1:-}" = -- ] && shift
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(-b 8 -e 256M -f 2 -n 20 -w 5)
# A build's braidrun: tools/braidrun, or src/braidrun in a build of a commit from before the
# tools moved to tools/ (either build may be such an older one).
braidrun_of() {
  local r="$1/tools/braidrun"
  [ -x "$r" ] || [ ! -x "$1/src/braidrun" ] || r="$1/src/braidrun"
  echo "$r"
}
for d in "$a" "$b"; do
  for f in "$(braidrun_of "$d")" "$d/perf/all_reduce_perf"; do
    [ -x "$f" ] || { echo "$0: $f is not built" >&2; exit 2; }
  done
done
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
for ((r = 0; r < rounds; r++)); do
  for k in a b; do
    d="$a" vars="${A_ENV:-}"
    [ "$k" = b ] && d="$b" vars="${B_ENV:-}"
    # shellcheck disable=SC2086  # the variables' list splits into words on purpose
    env $vars "$(braidrun_of "$d")" -n "${NRANKS:-2}" "$d/perf/all_reduce_perf" "${flags[@]}" \
      -J "$out/$k.$r.json" >"$out/$k.$r"
  done
done
python3 - "$out" "$rounds" "$a" "$b" <<'PY'
import json, statistics, sys, os
out, rounds, a, b = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def table(k):
    rows = {}
    for r in range(rounds):
        # The JSON document's times have every digit; the table's two decimals are 2% of a
        # 0.5 us call. A build from before -J wrote none: its table then.
        path = os.path.join(out, f"{k}.{r}.json")
        if os.path.exists(path):
            for res in json.load(open(path))["results"]:
                o = res["out_of_place"]
                rows.setdefault(int(res["size"]), []).append((o["time"], o["bus_bw"]))
            continue
        for line in open(os.path.join(out, f"{k}.{r}")):
            f = line.split()
            if f and f[0].endswith(":"):  # braidrun's rank prefix
                f = f[1:]
            if len(f) >= 8 and f[0].isdigit():  # size count type redop root time algbw busbw
                rows.setdefault(int(f[0]), []).append((float(f[5]), float(f[7])))
    return {s: (statistics.median(t for t, _ in v), statistics.median(b for _, b in v))
            for s, v in rows.items()}
ta, tb = table("a"), table("b")
ea, eb = os.environ.get("A_ENV", ""), os.environ.get("B_ENV", "")
print(f"# A = {a} {ea}, B = {b} {eb}: medians of {rounds} runs each, alternating; out of place;"
      f" {os.environ.get('NRANKS', '2')} ranks")
print(f"{'size (B)':>12} {'A us':>10} {'B us':>10} {'A GB/s':>8} {'B GB/s':>8} {'B/A':>6}")
nan = float("nan")
for s in sorted(ta):
    (xt, xb), (yt, yb) = ta[s], tb.get(s, (nan, nan))
    # B's busbw over A's is A's time over B's: defined at 8 B too, where busbw prints 0.00.
    ratio = f"{xt / yt:6.3f}" if yt > 0 else f"{'-':>6}"
    print(f"{s:>12} {xt:>10.3f} {yt:>10.3f} {xb:>8.2f} {yb:>8.2f} {ratio}")
PY
