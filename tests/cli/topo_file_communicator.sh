#!/bin/sh
# A communicator with BRAID_TOPO_FILE (set by the test, with BRAID_DEBUG=INFO) reports the
# loaded layout: all_reduce_perf on 2 thread ranks logs the file's 8 GPUs and 5 NICs.
#   topo_file_communicator.sh ALL_REDUCE_PERF
perf="$1"
"$perf" -t 2 -b 8 -e 8 -n 1 -w 0 2>&1 |
  grep "topology from BRAID_TOPO_FILE=.*8 GPUs, 5 NICs" >/dev/null
