#!/bin/sh
# The same for NCCL_BUFFSIZE: the warning names the variable the user set, and the run goes on.
#   config_small_nccl_buffer_named.sh ALL_REDUCE_PERF
perf="$1"
out=$(BRAID_CHUNKSIZE=1M NCCL_BUFFSIZE=1M "$perf" -t 2 -b 8 -e 8 -n 1 -w 0 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] && echo "$out" |
  grep -q "BRAID WARN NCCL_BUFFSIZE=.1M. holds fewer than 2 chunks"
