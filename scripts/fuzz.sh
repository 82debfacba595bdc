#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for SECONDS (default 60), seeded with
# the topology files in ../shared/topologies (copied into a temporary corpus; the repository and
# ../shared are not written). Exits non-zero when a target crashes, leaks or times out; the
# reproducer (crash-*, leak-*, timeout-*) is kept in the artifact directory it prints.
#   scripts/fuzz.sh [SECONDS]
# Environment: BRAID_FUZZ_BUILD (build dir, default /tmp/braid-fuzz-build), BRAID_SHARED_DIR
# (default ../shared next to the repository), CC/CXX (default clang/clang++).
# Needs clang and libFuzzer (Debian: apt-get install clang libclang-rt-14-dev).
set -euo pipefail

secs="${1:-60}"
case "$secs" in '' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;; esac
root="$(cd "$(dirname "$0")/.." && pwd)"
shared="${BRAID_SHARED_DIR:-$root/../shared}"
build="${BRAID_FUZZ_BUILD:-/tmp/braid-fuzz-build}"
export CC="${CC:-clang}" CXX="${CXX:-clang++}"
# libbraid links UCX, whose signal handler would catch a crash before libFuzzer saves it.
export UCX_HANDLE_ERRORS=none UCX_ERROR_SIGNALS=

if ! command -v "$CXX" >/dev/null; then
  echo "fuzz.sh: $CXX not found (apt-get install clang libclang-rt-14-dev)" >&2
  exit 2
fi
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$root"
fi
if ! ninja -C "$build" -t targets all 2>/dev/null | grep -q '^tests/fuzz_hwloc_xml:'; then
  echo "fuzz.sh: $build has no fuzz targets (configured without clang?); remove it or set BRAID_FUZZ_BUILD" >&2
  exit 2
fi
ninja -C "$build" tests/fuzz_topo_xml tests/fuzz_hwloc_xml

work="$(mktemp -d /tmp/braid-fuzz.XXXXXX)"
echo "fuzz.sh: corpora and artifacts in $work"
# target:seed directory
targets=("fuzz_topo_xml:topologies/nccl" "fuzz_hwloc_xml:topologies/hwloc")
status=0
for t in "${targets[@]}"; do
  name="${t%%:*}" seeds="$shared/${t#*:}"
  corpus="$work/$name/corpus" artifacts="$work/$name/artifacts"
  mkdir -p "$corpus" "$artifacts"
  if [ -d "$seeds" ]; then
    cp "$seeds"/*.xml "$corpus"/ 2>/dev/null || true
  else
    echo "fuzz.sh: no seeds at $seeds, starting from an empty corpus" >&2
  fi
  echo "fuzz.sh: $name for ${secs}s ($(ls "$corpus" | wc -l) seed file(s))"
  if ! BRAID_DEBUG=NONE "$build/tests/$name" -max_total_time="$secs" -timeout=10 \
      -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" \
      >"$work/$name/log" 2>&1; then
    echo "fuzz.sh: $name FAILED; last lines of $work/$name/log:" >&2
    tail -n 40 "$work/$name/log" >&2
    ls -l "$artifacts" >&2
    status=1
  else
    grep -E '^stat::number_of_executed_units|^stat::new_units_added' "$work/$name/log" || true
    echo "fuzz.sh: $name: no crash"
  fi
done
exit "$status"
