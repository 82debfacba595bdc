#!/bin/sh
# A BRAID_CHUNKSIZE larger than half the default buffer grows the buffer without a word: the
# run succeeds and says nothing of BUFFSIZE (the warning once named NCCL_BUFFSIZE, which nobody
# had set).
#   config_large_chunk_quiet.sh ALL_REDUCE_PERF
perf="$1"
out=$(BRAID_CHUNKSIZE=64M "$perf" -t 2 -b 8 -e 8 -n 1 -w 0 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] && ! echo "$out" | grep -q "BUFFSIZE"
