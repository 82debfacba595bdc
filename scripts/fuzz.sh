#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for SECONDS (default 60): the topology
# XML loaders, the BRAID_ALGO parser, the init decoders (unique id, peer cards, tuning figures
# and table) and the perf binaries' flags, each from its seed corpus in tests/fuzz/corpus (and
# the XML loaders also from the files in ../shared/topologies), copied into a temporary corpus:
# the repository and ../shared are not written. Exits non-zero when a target crashes, leaks or
# times out; the reproducer (crash-*, leak-*, timeout-*) is kept in the artifact directory it
# prints.
#   scripts/fuzz.sh [SECONDS]
# Environment: BRAID_FUZZ_RUNS (run that many inputs from seed 1 instead, the same every time),
# BRAID_FUZZ_BUILD_ONLY=1 (build the targets, run nothing),
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
# shellcheck source=stages.sh
. "$root/scripts/stages.sh"
stage_begin
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$root"
fi
# grep reads a captured list: 'ninja | grep -q' fails under pipefail when grep stops reading early.
targets_list="$(ninja -C "$build" -t targets all 2>/dev/null || true)"
if ! grep -q '^tests/fuzz/fuzz_hwloc_xml:' <<<"$targets_list"; then
  echo "fuzz.sh: $build has no fuzz targets (configured without clang?); remove it or set BRAID_FUZZ_BUILD" >&2
  exit 2
fi
rc=0
ninja -C "$build" tests/fuzz/fuzz_topo_xml tests/fuzz/fuzz_hwloc_xml tests/fuzz/fuzz_algo_spec \
  tests/fuzz/fuzz_bootstrap tests/fuzz/fuzz_perf_flags >"$build/fuzz-build.log" 2>&1 || rc=$?
stage_end "fuzz build" "$rc"
if [ "$rc" != 0 ]; then
  tail -n 40 "$build/fuzz-build.log" >&2
  exit "$rc"
fi
# BRAID_FUZZ_BUILD_ONLY=1: build the targets and stop (CI builds them beside other work).
[ "${BRAID_FUZZ_BUILD_ONLY:-0}" = 1 ] && exit 0
stage_begin

work="$(mktemp -d /tmp/braid-fuzz.XXXXXX)"
echo "fuzz.sh: corpora and artifacts in $work"
# Each target starts from its seed corpus in tests/fuzz/corpus/NAME (small inputs written for
# it: valid and nearly valid ones), and the XML loaders also from the real topology files under
# ../shared when it is there. target:extra seed directory under ../shared ('-' for none).
targets=("fuzz_topo_xml:topologies/nccl" "fuzz_hwloc_xml:topologies/hwloc"
  "fuzz_algo_spec:-" "fuzz_bootstrap:-" "fuzz_perf_flags:-")
# One target: seeds its corpus, runs, writes $work/NAME/log and $work/NAME/status.
run_target() {  # TARGET:SEEDS
  local t="$1" name seeds corpus artifacts bound rc=0
  name="${t%%:*}" seeds="$shared/${t#*:}"
  corpus="$work/$name/corpus" artifacts="$work/$name/artifacts"
  mkdir -p "$corpus" "$artifacts"
  cp "$root/tests/fuzz/corpus/$name"/* "$corpus"/
  if [ "${t#*:}" != - ]; then
    if [ -d "$seeds" ]; then
      cp "$seeds"/*.xml "$corpus"/ 2>/dev/null || true
    else
      echo "fuzz.sh: $name: no extra seeds at $seeds (BRAID_SHARED_DIR), the repository's only" >&2
    fi
  fi
  # BRAID_FUZZ_RUNS=N: N inputs from seed 1 instead of SECONDS, the same run every time.
  if [ -n "${BRAID_FUZZ_RUNS:-}" ]; then
    bound=(-runs="$BRAID_FUZZ_RUNS" -seed=1)
  else
    bound=(-max_total_time="$secs" -seed=1)
  fi
  BRAID_DEBUG=NONE "$build/tests/fuzz/$name" "${bound[@]}" -timeout=10 -rss_limit_mb=4096 \
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
stage_end fuzzing "$status"
exit "$status"
