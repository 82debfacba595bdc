#!/usr/bin/env bash
# The main job: all-reduce bus bandwidth over 4 local ranks (processes launched by
# braidrun), 8 B .. 128 MiB, nccl-tests' table. Extra arguments go to all_reduce_perf.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
exec build/tools/braidrun -n "${NRANKS:-4}" build/perf/all_reduce_perf -b 8 -e 128M -f 2 "$@"
