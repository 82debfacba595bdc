#!/bin/sh
# A BRAID_ALGO that does not parse fails init, naming the item, before any call runs
# (all_reduce_perf on 2 thread ranks exits non-zero and says which item).
#   perf_bad_braid_algo.sh ALL_REDUCE_PERF
perf="$1"
out=$(BRAID_ALGO="ring;;tree" "$perf" -t 2 -b 8 -e 8 -n 1 -w 0 2>&1)
rc=$?
echo "$out"
[ $rc -ne 0 ] && echo "$out" | grep -q "braidCommInitRank failed.*item 2 is empty"
