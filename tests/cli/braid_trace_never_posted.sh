#!/bin/sh
# braid-trace on 4 dumps where rank 2 finished #11 and never posted all_reduce #12, in which
# ranks 0,1,3 wait on it: the verdict names rank 2 and #12 in words, --json has it in
# verdict.never_posted, and the communicator split from the root one comes after it, finished.
#   braid_trace_never_posted.sh BRAID_TRACE FIXTURES PYTHON3
. "$(dirname "$0")/braid_trace_preamble.sh"
report never_posted
has "^Verdict: comm 1a2b3c4d (4 ranks): hang in all_reduce #12"
has "rank 2 never posted all_reduce #12 (count 1024 float32 sum), which ranks 0,1,3 are in, waiting on rank 2; its last finished call is #11"
has "rank 0: in all_reduce #12 for 2.00 s (started, step 2 of 6, waiting on rank 2)"
# The root communicator first, then the split one with activity.
echo "$out" | awk '/^Verdict: comm 1a2b3c4d/ { root = NR }
  /comm c0ffee00 \(2 ranks, split from 1a2b3c4d\): no hang: every rank finished #2/ { child = NR }
  END { exit !(root && child > root) }'
check_json never_posted '
v = d["verdict"]
assert v["status"] == "hang" and v["comm"] == "1a2b3c4d5e6f7081" and v["seq"] == 12, v
np = v["never_posted"]
assert len(np) == 1, np
e = np[0]
assert (e["rank"], e["seq"], e["call"], e["count"], e["dtype"], e["op"]) == (2, 12, "all_reduce", 1024, "float32", "sum"), e
assert e["waited_on_by"] == [0, 1, 3] and e["last_finished"] == 11, e
assert [c["rank"] for c in v["in_call"]] == [0, 1, 3], v["in_call"]
assert (v["reached"], v["frontier"]) == (11, 12), v
assert [c["comm"] for c in v["comms"]] == ["1a2b3c4d5e6f7081", "c0ffee0011223344"]
assert v["comms"][1]["status"] == "ok"
assert d["mismatches"] == [] and d["problems"] == [], (d["mismatches"], d["problems"])
'
