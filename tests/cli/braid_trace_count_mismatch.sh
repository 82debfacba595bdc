#!/bin/sh
# braid-trace where rank 3 called all_reduce #7 with count 512 and ranks 0-2 with 1024: one
# mismatch line names both ranks and both calls, and the verdict says the calls do not match.
#   braid_trace_count_mismatch.sh BRAID_TRACE FIXTURES PYTHON3
. "$(dirname "$0")/braid_trace_preamble.sh"
report count_mismatch
has "^  comm 1a2b3c4d #7: rank 0 called all_reduce count 1024 float32 sum, rank 3 called all_reduce count 512 float32 sum$"
has "rank 3 called it as all_reduce count 512 float32 sum, the others as all_reduce count 1024 float32 sum: the calls do not match"
check_json count_mismatch '
m = d["mismatches"]
assert len(m) == 1, m
e = m[0]
assert (e["kind"], e["seq"], e["rank"], e["reference_rank"]) == ("mismatch", 7, 3, 0), e
assert (e["call"]["count"], e["reference"]["count"]) == (512, 1024), e
assert d["verdict"]["differing"] == [3], d["verdict"]
'
