#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for SECONDS (default 60): the topology
# XML loaders seeded with the files in ../shared/topologies (copied into a temporary corpus; the
# repository and ../shared are not written), the BRAID_ALGO parser, the init decoders (unique
# id, peer cards, tuning figures and table) and the perf binaries' flags, seeded with texts
# written here. Exits non-zero when a target crashes, leaks or times out; the reproducer
# (crash-*, leak-*, timeout-*) is kept in the artifact directory it prints.
#   scripts/fuzz.sh [SECONDS]
# Environment: BRAID_FUZZ_RUNS (run that many inputs from seed 1 instead, the same every time),
# BRAID_FUZZ_JOBS (targets run at once, default the number of cores),
# BRAID_FUZZ_BUILD (build dir, default build-fuzz in the repository), BRAID_SHARED_DIR
# (default ../shared next to the repository), CC/CXX (default clang/clang++).
# Needs clang and libFuzzer (Debian: apt-get install clang libclang-rt-14-dev).
set -euo pipefail

secs="${1:-60}"
case "$secs" in '' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;; esac
root="$(cd "$(dirname "$0")/.." && pwd)"
shared="${BRAID_SHARED_DIR:-$root/../shared}"
build="${BRAID_FUZZ_BUILD:-$root/build-fuzz}"
export CC="${CC:-clang}" CXX="${CXX:-clang++}"
# libbraid links UCX, whose signal handler would catch a crash before libFuzzer saves it.
export UCX_HANDLE_ERRORS=none UCX_ERROR_SIGNALS=
# A UBSan finding (in a sanitized libbraid, as in build-asan) is a crash, not a printed line.
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

# shellcheck source=need_clang.sh
. "$root/scripts/need_clang.sh"
need_clang
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$root"
fi
# grep reads a captured list: 'ninja | grep -q' fails under pipefail when grep stops reading early.
targets_list="$(ninja -C "$build" -t targets all 2>/dev/null || true)"
if ! grep -q '^tests/fuzz_hwloc_xml:' <<<"$targets_list"; then
  echo "fuzz.sh: $build has no fuzz targets (configured without clang?); remove it or set BRAID_FUZZ_BUILD" >&2
  exit 2
fi
ninja -C "$build" tests/fuzz_topo_xml tests/fuzz_hwloc_xml tests/fuzz_algo_spec tests/fuzz_bootstrap \
  tests/fuzz_perf_flags

work="$(mktemp -d /tmp/braid-fuzz.XXXXXX)"
echo "fuzz.sh: corpora and artifacts in $work"
# target:seed directory under ../shared, or :inline for the seeds written below
targets=("fuzz_topo_xml:topologies/nccl" "fuzz_hwloc_xml:topologies/hwloc"
  "fuzz_algo_spec:inline" "fuzz_bootstrap:inline" "fuzz_perf_flags:inline")
# Seeds of the targets whose inputs are short texts: valid and nearly valid ones.
inline_seeds() {  # TARGET DIR
  case "$1" in
    fuzz_algo_spec)
      printf 'ring' >"$2/1"
      printf 'allreduce:ring@0-64K,rhd@64K-;broadcast:tree' >"$2/2"
      printf 'allgather:bruck@1M-2G;reducescatter:ring' >"$2/3"
      printf 'allreduce:nosuch@0-1' >"$2/4" ;;
    fuzz_bootstrap)
      printf 'host\nmachine/boot\n1234\n/braid-1234-00\n131072\n0\n\n2\n0\n\n\n0 1\n140000000\n0\n77\n10.0.0.1:4000\n-1\n0\n\nallreduce:ring@1M-\n' >"$2/1"
      printf 'intra_latency_us = 1.5\nintra_bw_gbs = 10\nnics_per_host = 2\ncache_bytes = 1048576\n' >"$2/2"
      printf 'allreduce 8 rhd;allgather 1048576 ring' >"$2/3"
      printf '%0256d' 0 >"$2/4" ;;
    fuzz_perf_flags)  # arguments separated by NUL bytes
      printf -- '-b\0008\000-e\000128M\000-f\0002\000-g\0001' >"$2/1"
      printf -- '-d\000all\000-o\000all\000-r\000all\000-c\0001\000-n\0005' >"$2/2"
      printf -- '--minbytes\0001K\000--maxbytes\0001M\000--stepbytes\00064K' >"$2/3"
      printf -- '-A\000ring\000-J\000/dev/null\000-z\0001\000-t\0004' >"$2/4" ;;
  esac
}
# One target: seeds its corpus, runs, writes $work/NAME/log and $work/NAME/status.
run_target() {  # TARGET:SEEDS
  local t="$1" name seeds corpus artifacts bound rc=0
  name="${t%%:*}" seeds="$shared/${t#*:}"
  corpus="$work/$name/corpus" artifacts="$work/$name/artifacts"
  mkdir -p "$corpus" "$artifacts"
  if [ "${t#*:}" = inline ]; then
    inline_seeds "$name" "$corpus"
  elif [ -d "$seeds" ]; then
    cp "$seeds"/*.xml "$corpus"/ 2>/dev/null || true
  else
    echo "fuzz.sh: no seeds at $seeds, starting from an empty corpus" >&2
  fi
  # BRAID_FUZZ_RUNS=N: N inputs from seed 1 instead of SECONDS, the same run every time.
  if [ -n "${BRAID_FUZZ_RUNS:-}" ]; then
    bound=(-runs="$BRAID_FUZZ_RUNS" -seed=1)
  else
    bound=(-max_total_time="$secs" -seed=1)
  fi
  BRAID_DEBUG=NONE "$build/tests/$name" "${bound[@]}" -timeout=10 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" >"$work/$name/log" 2>&1 || rc=$?
  echo "$rc" >"$work/$name/status"
}
how="${secs} s each"
[ -n "${BRAID_FUZZ_RUNS:-}" ] && how="$BRAID_FUZZ_RUNS runs each from seed 1"
# Targets run BRAID_FUZZ_JOBS at a time (default: one per core), each on a core of its own.
jobs="${BRAID_FUZZ_JOBS:-$(nproc)}"
echo "fuzz.sh: ${#targets[@]} targets, $how, $jobs at a time"
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  run_target "$t" &
done
wait
status=0
for t in "${targets[@]}"; do
  name="${t%%:*}"
  if [ "$(cat "$work/$name/status" 2>/dev/null || echo 1)" != 0 ]; then
    echo "fuzz.sh: $name FAILED; last lines of $work/$name/log:" >&2
    tail -n 40 "$work/$name/log" >&2
    ls -l "$work/$name/artifacts" >&2
    status=1
  else
    grep -E '^stat::number_of_executed_units|^stat::new_units_added' "$work/$name/log" || true
    echo "fuzz.sh: $name ($(ls "$work/$name/corpus" | wc -l) corpus files): no crash"
  fi
done
exit "$status"
