#!/usr/bin/env bash
# Recovery time after a rank dies: N rank processes run collectives (all-reduce, broadcast,
# all-gather, reduce-scatter, 256 KiB); one, chosen per seed, is killed with SIGKILL at a
# random point (between calls or inside one); each survivor times from its first failed call
# to its first call completed on the communicator braidCommShrink made (revoke, agreement,
# new bootstrap and init included). Prints one row per rank count: survivors measured, median,
# 90th percentile and worst, in seconds. Every seed must also pass the test's checks (all
# survivors agree on the same set, exact results after, nothing left in /dev/shm).
#   perf/recovery.sh [BUILD_DIR] [RANKS=4,8,16] [SEEDS=20]
# No peer runs beside it: Debian's Open MPI is built without ULFM (MPIX_Comm_shrink), Gloo
# has no shrink, and NCCL's needs GPUs.
set -euo pipefail
build="${1:-build}" ranks="${2:-4,8,16}" seeds="${3:-20}"
bin="$build/tests/core/fault_test"
[ -x "$bin" ] || { echo "recovery.sh: no $bin; build first (ninja -C $build)" >&2; exit 1; }
echo "# cores $(nproc); BRAID_TIMEOUT 4 s; $seeds seeds per rank count"
printf "%6s %10s %10s %10s %10s\n" ranks survivors median_s p90_s max_s
BRAID_TEST_FAULT_RANKS="$ranks" BRAID_TEST_FAULT_SEEDS="$seeds" \
  "$bin" --gtest_filter='Ranks/RandomKill.*' 2>/dev/null |
  awk '$1 == "RECOVERY" { printf "%6s %10s %10s %10s %10s\n", $3, $7, $9, $11, $13; n++ }
       /FAILED/ { bad = 1 } END { exit (bad || n == 0) }'
