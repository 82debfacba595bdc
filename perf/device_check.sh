#!/usr/bin/env bash
# Device checks for a machine with a CUDA GPU (issue 10), in one run of under 8 minutes:
#   1. configure build-cuda with -Dcuda=enabled (nvcc from PATH or /usr/local/cuda/bin) and
#      build what the checks run;
#   2. tests/kernels/cuda_kernels_test: the CUDA kernels bit for bit against the host kernels, every
#      dtype and op, and an all-reduce on 2 thread ranks ordered on each rank's CUDA stream
#      (braidStreamCreateCuda), eagerly and captured into a graph replayed 3 times (here it
#      must pass, not skip); cuda_elementwise_test, the kernels' arithmetic compiled for the
#      CPU;
#   3. perf/kernel_bench: out = a + b over 1 GiB buffers, fp32 and bf16, the kernel's GB/s
#      (3 x bytes / time) beside cudaMemcpy device to device (2 x bytes / time) and the ratio,
#      each result checked against the host kernel first;
#   4. all_reduce_perf, all_gather_perf, reduce_scatter_perf and alltoall_perf on 2 and 4
#      ranks (braidrun processes) on device memory (-B device: braidMemAlloc buffers, one GPU
#      shared by the ranks, the calls queued on each rank's CUDA stream and run by the
#      stream's proxy thread, device to device: the CUDA IPC transport, each process opening
#      its peers' buffers), every result checked (#wrong);
#   5. all_reduce_perf on 2 ranks as threads of one process (device pointers passed
#      directly), and on 2 processes staged through host memory (BRAID_CUDA_IPC=0), for
#      comparison with the IPC runs.
# Exit status: 0 when every step passed; 1 when any failed (a wrong value included).
# The log goes to $OUT/device_check.log when OUT is set, else build-cuda/device_check.log.
#
# Usage: perf/device_check.sh [BUILD_DIR]   (default build-cuda, relative to the repository)
#   DEVICE_CHECK_MAX_BYTES: the perf binaries' largest size (default 64M).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${1:-build-cuda}
max_bytes=${DEVICE_CHECK_MAX_BYTES:-64M}
logdir=${OUT:-$build}
mkdir -p "$logdir"
log=$logdir/device_check.log
exec > >(tee "$log") 2>&1

failed=()
start=$SECONDS
step() { printf '\n== [%4ds] %s\n' $((SECONDS - start)) "$*"; }
# check NAME TIMEOUT CMD...: runs CMD with a time limit and records a failure.
check() {
  local name=$1 limit=$2
  shift 2
  timeout --kill-after=10 "$limit" "$@"
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    if [ "$rc" -eq 124 ]; then
      echo "FAILED ($name): timed out after ${limit}s"
    else
      echo "FAILED ($name): exit status $rc"
    fi
    failed+=("$name")
  fi
  return "$rc"
}

step "device"
nvidia-smi -L 2>&1 || echo "nvidia-smi not found"
export PATH=$PATH:/usr/local/cuda/bin
nvcc --version | tail -1

step "configure $build (-Dcuda=enabled)"
if [ -f "$build/build.ninja" ]; then
  check configure 120 meson configure "$build" -Dcuda=enabled || exit 1
else
  check configure 120 meson setup "$build" -Dcuda=enabled || exit 1
fi

step "build"
targets=(tests/kernels/cuda_kernels_test tests/kernels/cuda_elementwise_test perf/kernel_bench tools/braidrun perf/all_reduce_perf
         perf/all_gather_perf perf/reduce_scatter_perf perf/alltoall_perf)
check build 300 ninja -C "$build" "${targets[@]}" || exit 1

step "cuda_kernels_test (must pass on a device, not skip)"
check cuda_kernels_test 120 "$build/tests/kernels/cuda_kernels_test"

step "cuda_elementwise_test (the kernels' arithmetic on the CPU)"
check cuda_elementwise_test 120 "$build/tests/kernels/cuda_elementwise_test"

step "kernel_bench: 1 GiB, fp32 and bf16"
check kernel_bench 120 "$build/perf/kernel_bench" --bytes 1G --iters 20 --dtype fp32,bf16

for n in 2 4; do
  for bin in all_reduce_perf all_gather_perf reduce_scatter_perf alltoall_perf; do
    step "$bin on $n ranks"
    check "$bin -n $n" 90 "$build/tools/braidrun" -n "$n" -- "$build/perf/$bin" \
      -B device -b 8 -e "$max_bytes" -f 8 -n 5 -w 2 -c 1
  done
done

step "all_reduce_perf on 2 thread ranks (device to device within one process)"
check "all_reduce_perf -t 2" 90 "$build/perf/all_reduce_perf" -t 2 \
  -B device -b 8 -e "$max_bytes" -f 8 -n 5 -w 2 -c 1
step "all_reduce_perf on 2 ranks staged through host memory (BRAID_CUDA_IPC=0)"
check "all_reduce_perf staged" 90 env BRAID_CUDA_IPC=0 "$build/tools/braidrun" -n 2 -- \
  "$build/perf/all_reduce_perf" -B device -b 8 -e "$max_bytes" -f 8 -n 5 -w 2 -c 1

step "done"
if [ ${#failed[@]} -ne 0 ]; then
  echo "device_check: FAILED: ${failed[*]} (log: $log)"
  exit 1
fi
echo "device_check: all passed (log: $log)"
