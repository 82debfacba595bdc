#!/bin/sh
# braid-trace where rank 1 skipped all_gather #3, so that its #3..#5 are the others' #4..#6:
# one "skipped" line, not a mismatch at every later seq.
#   braid_trace_skipped_call.sh BRAID_TRACE FIXTURES PYTHON3
. "$(dirname "$0")/braid_trace_preamble.sh"
report skipped_shift
has "^  comm 1a2b3c4d: rank 1 appears to have skipped all_gather #3 (count 128 float32): its #3 is the others' #4$"
[ "$(echo "$out" | grep -c "called")" = 0 ]
check_json skipped_shift '
m = d["mismatches"]
assert [(e["kind"], e["rank"], e["seq"]) for e in m] == [("skipped", 1, 3)], m
'
