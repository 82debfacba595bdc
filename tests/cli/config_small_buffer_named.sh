#!/bin/sh
# A BRAID_BUFFSIZE the user set that holds fewer than 2 chunks is named in the warning, and
# the run goes on.
#   config_small_buffer_named.sh ALL_REDUCE_PERF
perf="$1"
out=$(BRAID_CHUNKSIZE=1M BRAID_BUFFSIZE=1M "$perf" -t 2 -b 8 -e 8 -n 1 -w 0 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] && echo "$out" |
  grep -q "BRAID WARN BRAID_BUFFSIZE=.1M. holds fewer than 2 chunks"
