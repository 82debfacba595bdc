#!/bin/sh
# all_reduce_perf -B device: with a CUDA device the sweep runs on device buffers with 0 wrong;
# without one it stops at once saying why (no CUDA device, or Braid built without CUDA).
#   perf_device_memory.sh ALL_REDUCE_PERF
perf="$1"
out=$("$perf" -t 2 -B device -b 8 -e 64K -f 8 -n 2 -w 1 2>&1)
rc=$?
echo "$out"
if [ $rc -eq 0 ]; then
  echo "$out" | grep -q "Out of bounds values : 0 OK"
else
  echo "$out" | grep -q -e "no CUDA device" -e "built without CUDA"
fi
