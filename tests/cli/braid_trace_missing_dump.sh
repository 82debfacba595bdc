#!/bin/sh
# braid-trace with dumps from ranks 0,1,3 of 4 (rank 2 was stopped, as by SIGSTOP, and wrote
# none), the three waiting on rank 2 in all_reduce #5: rank 2 is named as the likely cause.
#   braid_trace_missing_dump.sh BRAID_TRACE FIXTURES PYTHON3
. "$(dirname "$0")/braid_trace_preamble.sh"
report missing_dump
has "^Verdict: comm 1a2b3c4d (4 ranks): hang in all_reduce #5 .*no dump from rank 2"
has "rank 2 wrote no dump (stopped, killed or stuck where it cannot dump); ranks 0,1,3 wait on it in all_reduce #5: the likely cause"
check_json missing_dump '
v = d["verdict"]
assert v["ranks_with_dump"] == [0, 1, 3] and v["nranks"] == 4, v
assert len(v["missing"]) == 1, v["missing"]
e = v["missing"][0]
assert (e["rank"], e["seq"], e["waited_on_by"]) == (2, 5, [0, 1, 3]), e
'
