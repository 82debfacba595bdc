#!/usr/bin/env bash
# Braid's all-reduce beside Open MPI's MPI_Allreduce and Gloo's allreduce (the programs in
# ../shared/peers), on the same ranks, in one run: these machines are noisy, so only ratios
# measured together mean anything. Also single-core memcpy bandwidth, the limit of a host copy,
# and one memcpy per rank at once (at most one per core), the memory system's: from these, the
# most busbw a large all-reduce can reach (b/limit; the derivation is in the table's code).
# On 2 ranks also the floor of the smallest call, two processes trading a cache line each way
# (perf/exchange_bench), in each round beside both libraries' time for that size.
# Prints the table and draws busbw against size as a PNG (gnuplot; PNG=path overrides where).
#
# Usage: perf/compare_peers.sh [NRANKS=2] [MINBYTES=8] [MAXBYTES=64M]
#   NRANKS >= 2; sizes in bytes with K, M, G suffixes, 4 <= MINBYTES <= MAXBYTES.
# Env: BRAID_SHARED_DIR (default ../shared), BUILD_DIR (default build), ROUNDS (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-2}
MINB=${2:-8}
MAXB=${3:-64M}
SHARED=${BRAID_SHARED_DIR:-../shared}
BUILD=${BUILD_DIR:-build}
ROUNDS=${ROUNDS:-2}
PEERS="$SHARED/peers"
# Every argument is checked before anything is built or run.
usage() {  # MESSAGE
  echo "compare_peers: $1" >&2
  echo "usage: perf/compare_peers.sh [NRANKS=2] [MINBYTES=8] [MAXBYTES=64M] (env ROUNDS=2)" >&2
  exit 2
}
if [ "$N" = "-h" ] || [ "$N" = "--help" ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
to_bytes() {  # NAME VALUE -> bytes (K, M, G suffixes), or the usage message
  [[ "$2" =~ ^[0-9]{1,12}[KMGkmg]?$ ]] ||
    usage "$1 '$2' is not a size in bytes of at most 12 digits (like 8, 64K, 256M)"
  local v
  # numfmt may fail or print more digits than bash's 64-bit arithmetic holds: 1T at most.
  v=$(numfmt --from=iec "${2^^}" 2>/dev/null) && [[ "$v" =~ ^[0-9]{1,13}$ ]] && ((v <= 1099511627776)) ||
    usage "$1 '$2' is more than 1T bytes"
  echo "$v"
}
# Digits are counted before any arithmetic: bash wraps a 20-digit number around silently.
[[ "$N" =~ ^[0-9]{1,5}$ ]] && ((10#$N >= 2 && 10#$N <= 65536)) ||
  usage "NRANKS '$N' must be an integer from 2 to 65536 (braidrun's limit)"
N=$((10#$N))
[[ "$ROUNDS" =~ ^[0-9]{1,4}$ ]] && ((10#$ROUNDS >= 1)) ||
  usage "ROUNDS '$ROUNDS' must be an integer from 1 to 9999"
ROUNDS=$((10#$ROUNDS))
MINB=$(to_bytes MINBYTES "$MINB")
MAXB=$(to_bytes MAXBYTES "$MAXB")
((MINB >= 4)) || usage "MINBYTES $MINB is less than one float (4 bytes)"
((MINB <= MAXB)) || usage "MINBYTES $MINB is larger than MAXBYTES $MAXB"
if [ ! -d "$PEERS" ]; then
  echo "compare_peers: $PEERS not found (set BRAID_SHARED_DIR); nothing to compare" >&2
  exit 2
fi
scripts/setup.sh "$BUILD"
OUT="$BUILD/peers"
mkdir -p "$OUT"
# memcpy_bench's sizes: single-core memcpy at the largest size compared (memcpy_bench needs
# 32 bytes at least), and the memory limit at 256 MiB at least, far past any cache, whatever
# the sizes compared.
COPYB=$((MAXB < 32 ? 32 : MAXB))
LIMITB=$((MAXB < (256 << 20) ? (256 << 20) : MAXB))

[ -x "$OUT/mpi_allreduce_bench" ] || mpicc -O2 -o "$OUT/mpi_allreduce_bench" "$PEERS/mpi_allreduce_bench.c"
[ -x "$OUT/memcpy_bench" ] || gcc -O3 -march=native -o "$OUT/memcpy_bench" "$PEERS/memcpy_bench.c"
have_gloo=0
if [ ! -f /usr/include/gloo/allreduce.h ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends libgloo-dev \
    >/dev/null 2>&1 || echo "compare_peers: libgloo-dev could not be installed; Gloo is left out" >&2
fi
if [ -f /usr/include/gloo/allreduce.h ]; then
  [ -x "$OUT/gloo_allreduce_bench" ] || g++ -O2 -std=c++17 -o "$OUT/gloo_allreduce_bench" \
    "$PEERS/gloo_allreduce_bench.cc" -lgloo -lpthread
  have_gloo=1
fi

echo "# $N ranks, float sum, sizes $MINB..$MAXB bytes; busbw in GB/s (1e9 B/s)"
# The sizes, MINBYTES doubling up to MAXBYTES, in three bands with their iteration counts,
# the same for Braid and the MPI peer: 5000 up to 64 KiB, where 200 calls of a fraction of a
# microsecond last less than the wake-up of a rank that slept in the barrier before them (one
# such skew adds ~0.3 us a call); 200 below 8 MiB; 11 from 8 MiB. A band is (first size, last
# size, Braid's iterations and warm-up calls, the MPI peer's argument: it runs ten times that
# below 8 MiB and half plus one from 8 MiB); a band with no size is left out.
SPLIT=$((8 << 20))
SMALL=$((64 << 10))
BANDS=()
add_band() {  # LOW HIGH (bytes: sizes in [LOW, HIGH)) ITERS WARMUP MPIARG
  local first=0 last=0 s
  for ((s = MINB; s <= MAXB; s *= 2)); do
    if ((s >= $1 && s < $2)); then
      ((first)) || first=$s
      last=$s
    fi
  done
  if ((first)); then BANDS+=("$first $last $3 $4 $5"); fi
}
add_band 0 $((SMALL + 1)) 5000 100 500
add_band $((SMALL + 1)) "$SPLIT" 200 20 20
add_band "$SPLIT" $((MAXB + 1)) 11 5 20
# Braid on heap buffers (-B host, what a program that mallocs gets) or on buffers from
# braidMemAllocHost (-B shared: the ranks read each other's pieces in place).
run_braid() {  # MEMORY FROM TO ITERS WARMUP OUTFILE (appended to)
  "$BUILD/tools/braidrun" -n "$N" --no-prefix "$BUILD/perf/all_reduce_perf" -B "$1" -b "$2" \
    -e "$3" -f 2 -n "$4" -w "$5" >>"$6"
}
run_mpi() {  # FROM TO ARG
  OMPI_MCA_btl_vader_single_copy_mechanism=none mpirun --allow-run-as-root --oversubscribe \
    -np "$N" "$OUT/mpi_allreduce_bench" "$1" "$2" "$3" >>"$OUT/mpi.txt" 2>/dev/null
}
# ROUNDS rounds (default 2), each running every library once in turn, band by band; each
# library keeps, per size, its fastest round (and memcpy its fastest), so a burst of noise
# from a neighbour on a shared machine costs no library a size it would otherwise win.
memcpy_rates() {  # memcpy_bench's output on stdin -> its memcpy GB/s, one line per run
  awk '{for (i = 1; i < NF; i++) if ($i == "memcpy") print $(i + 1)}'
}
: >"$OUT/braid.txt"; : >"$OUT/braid_shared.txt"; : >"$OUT/mpi.txt"; : >"$OUT/gloo.txt"
: >"$OUT/memcpy.txt"; : >"$OUT/concurrent.txt"; : >"$OUT/exchange.txt"
COPIES=$(( N < $(nproc) ? N : $(nproc) ))
for ((round = 0; round < ROUNDS; round++)); do
  # Band by band, the three runs back to back (a band takes seconds), so that a round's own
  # ratio pairs them in time: this VM's speed can double or halve from one minute to the
  # next (8 B: 0.20 us for Open MPI in one round, 0.58 and 0.72 in the next two). With one
  # band of 200 calls the peer's first size took its start-up (5 warm-up calls): 8 B read
  # 1.1-2.5 us, against 0.53 us with 2000; hence Braid's bands and counts for it too.
  for band in "${BANDS[@]}"; do
    read -r from to iters warmup mpiarg <<<"$band"
    run_braid host "$from" "$to" "$iters" "$warmup" "$OUT/braid.txt"
    run_mpi "$from" "$to" "$mpiarg"
    run_braid shared "$from" "$to" "$iters" "$warmup" "$OUT/braid_shared.txt"
    # After the small band: the floor of its smallest call (perf/exchange_bench), measured
    # in the same minute.
    if [ "$N" = 2 ] && [ "$from" = "$MINB" ] && [ "$from" -le "$SMALL" ]; then
      "$BUILD/perf/exchange_bench" 1M 3 | awk '$1 == "exchange" {print $2}' >>"$OUT/exchange.txt"
    fi
  done
  "$OUT/memcpy_bench" "$COPYB" >>"$OUT/memcpy.txt"
  # The memory system's limit: one memcpy per rank at once (at most one per core); the rates
  # of one round's copies on one line of concurrent.txt. A copy that fails (each takes 3 x
  # MAXBYTES of memory) stops the script rather than lower the limit.
  pids=()
  for ((k = 0; k < COPIES; k++)); do
    "$OUT/memcpy_bench" "$LIMITB" >"$OUT/concurrent.$k" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || { echo "compare_peers: a concurrent memcpy_bench failed" >&2; exit 1; }
  done
  line=""
  for ((k = 0; k < COPIES; k++)); do line+=" $(memcpy_rates <"$OUT/concurrent.$k")"; done
  echo "$line" >>"$OUT/concurrent.txt"
  # Gloo last: it is 30-300x slower, and memcpy is best measured next to Braid's largest band.
  if [ "$have_gloo" = 1 ]; then
    "$OUT/gloo_allreduce_bench" "$N" "$MINB" "$MAXB" ring_chunked >>"$OUT/gloo.txt" 2>/dev/null ||
      have_gloo=0
  fi
done
memcpy_gbs=$(memcpy_rates <"$OUT/memcpy.txt" | sort -g | tail -1)
# The round whose copies together moved most: their summed rate, bytes copied per second.
concurrent_gbs=$(awk '{s = 0; for (i = 1; i <= NF; i++) s += $i; if (s > v) v = s} END {print v}' "$OUT/concurrent.txt")

python3 - "$OUT" "$have_gloo" "$memcpy_gbs" "$ROUNDS" "$N" "$concurrent_gbs" "$COPIES" "$LIMITB" <<'PY'
import sys
out, have_gloo, memcpy = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
n, concurrent, copies = int(sys.argv[5]), float(sys.argv[6] or 0), int(sys.argv[7])
limit_mib = int(sys.argv[8]) >> 20
# An all-reduce of S bytes per rank, once its buffers outgrow the caches, reads every rank's
# input from memory and writes every rank's output: n*S bytes read and n*S written at least,
# as n memcpys of S. With the memory system copying `concurrent` bytes a second in all (the
# concurrent memcpys' sum), it takes at least n*S/concurrent seconds, and its busbw,
# 2(n-1)/n * S/t, is at most 2(n-1)/n * concurrent/n.
limit = 2 * (n - 1) / n * concurrent / n if n > 1 else float("nan")
def rows(path, size_col, time_col, busbw_col):
    d = {}  # per size, the fastest round's (time, busbw)
    for line in open(path):
        f = line.split()
        if not f or f[0].startswith("#") or not f[0].isdigit():
            continue
        size, t = int(f[size_col]), float(f[time_col])
        if size not in d or t < d[size][0]:
            d[size] = (t, float(f[busbw_col]))
    return d
def per_round(path, size_col, time_col):
    d = {}  # per size, its time in each round, in round order (the files are appended so)
    for line in open(path):
        f = line.split()
        if f and not f[0].startswith("#") and f[0].isdigit():
            d.setdefault(int(f[size_col]), []).append(float(f[time_col]))
    return d
# A round runs Braid and then MPI band by band, within seconds, while the machine's state
# (where the hypervisor runs the vCPUs, a neighbour's load) can change between minutes and
# halve or double every figure: a round's own ratio pairs the two libraries in time. The
# median and the lowest of those ratios are printed beside the ratio of the fastest rounds.
def round_ratios(peer_rounds, braid_rounds, size):
    p, b = peer_rounds.get(size, []), braid_rounds.get(size, [])
    ratios = sorted(p[k] / b[k] for k in range(min(len(p), len(b))) if b[k] > 0)
    if not ratios:
        return float("nan"), float("nan")
    m = len(ratios) // 2
    med = ratios[m] if len(ratios) % 2 else (ratios[m - 1] + ratios[m]) / 2
    return med, ratios[0]
braid_rounds = per_round(f"{out}/braid.txt", 0, 5)
mpi_rounds = per_round(f"{out}/mpi.txt", 0, 1)
braid = rows(f"{out}/braid.txt", 0, 5, 7)   # out-of-place time and busbw
shared = rows(f"{out}/braid_shared.txt", 0, 5, 7)
mpi = rows(f"{out}/mpi.txt", 0, 1, 3)
gloo = rows(f"{out}/gloo.txt", 0, 1, 3) if have_gloo else {}
print(f"# single-core memcpy: {memcpy} GB/s; each figure the fastest of {sys.argv[4]} rounds")
print(f"# {copies} memcpy{'s' if copies > 1 else ''} of {limit_mib} MiB at once: {concurrent:.2f} GB/s"
      f" together; so the memory system's limit for a large all-reduce's busbw on {n} ranks:"
      f" {limit:.2f} GB/s (b/limit, sh/limit)")
# The floor of the smallest call: two processes trading one cache line each way (what an
# all-reduce of two ranks cannot do with less), in each round beside both libraries' time.
floor = [float(x) for x in open(f"{out}/exchange.txt").read().split()]
if floor and braid_rounds and mpi_rounds:
    first = min(braid_rounds)
    fmt = lambda xs: " ".join(f"{x:.2f}" for x in xs)
    print(f"# {first} B, us in each round: Braid {fmt(braid_rounds[first])}; Open MPI"
          f" {fmt(mpi_rounds.get(first, []))}; the floor, two processes trading a cache line"
          f" each way (perf/exchange_bench): {fmt(floor)}")
print("# braid: heap buffers (-B host); shared: braidMemAllocHost buffers (-B shared)")
print("# b/mpi: the fastest rounds' ratio; med, min: the median and lowest of each round's own b/mpi")
print(f"#{'bytes':>11} {'braid_us':>9} {'mpi_us':>9} {'gloo_us':>9} {'braid_bw':>9} {'shared_bw':>9} {'mpi_bw':>9} {'gloo_bw':>9} {'b/mpi':>6} {'med':>5} {'min':>5} {'sh/mpi':>6} {'b/gloo':>7} {'b/memcpy':>8} {'sh/memcpy':>9} {'b/limit':>7} {'sh/limit':>8}")
na = float("nan")
for size in sorted(braid):
    bt, bb = braid[size]
    st, sb = shared.get(size, (na, na))
    mt, mb = mpi.get(size, (na, na))
    gt, gb = gloo.get(size, (na, na))
    r = lambda a, b: f"{a / b:.2f}" if b and b == b and b > 0 and a == a else "-"
    mem = float(memcpy) if memcpy else 0
    # Library against library: the ratio of times, the same as of busbw (one formula, one
    # size) but not rounded to the printed busbw's 3 decimals, which small sizes lose to.
    med, low = round_ratios(mpi_rounds, braid_rounds, size)
    print(f" {size:>11} {bt:>9.2f} {mt:>9.2f} {gt:>9.2f} {bb:>9.3f} {sb:>9.3f} {mb:>9.3f} {gb:>9.3f} {r(mt, bt):>6} {r(med, 1):>5} {r(low, 1):>5} {r(mt, st):>6} {r(gt, bt):>7} {r(bb, mem):>8} {r(sb, mem):>9} {r(bb, limit):>7} {r(sb, limit):>8}")
with open(f"{out}/compare.dat", "w") as d:
    for size in sorted(braid):
        d.write(f"{size} {braid[size][1]} {mpi.get(size, (na, na))[1]} {gloo.get(size, (na, na))[1]} {memcpy or na} {shared.get(size, (na, na))[1]} {limit}\n")
PY
# The plot: busbw against size, one line per library, single-core memcpy and the memory limit.
PNG=${PNG:-$OUT/compare_peers-$N.png}
command -v gnuplot >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnuplot-nox >/dev/null 2>&1 || true
if command -v gnuplot >/dev/null; then
  gnuplot <<GP
set terminal pngcairo size 900,560 noenhanced
set output '$PNG'
set logscale x 2
set logscale y
set key left top
set grid
set xlabel 'bytes'
set ylabel 'busbw (GB/s)'
set title 'all-reduce, $N ranks, float sum (measured in one run)'
plot '$OUT/compare.dat' using 1:2 with linespoints title 'Braid (heap buffers)', \
     '' using 1:6 with linespoints title 'Braid (braidMemAllocHost buffers)', \
     '' using 1:3 with linespoints title 'Open MPI', \
     '' using 1:4 with linespoints title 'Gloo', \
     '' using 1:5 with lines dashtype 2 title 'single-core memcpy', \
     '' using 1:7 with lines dashtype 3 title 'memory limit of a large all-reduce'
GP
  echo "# plot: $PNG"
else
  echo "# no gnuplot: the plot's data is $OUT/compare.dat"
fi
