#!/bin/sh
# braid-trace's summary on 2 ranks with step records: per (collective, bytes, algo) the calls,
# mean and min time, and the mean wait, copy, reduce and unaccounted time with their share,
# exactly as the fixture's numbers give them (steps/rank-*.json: all_reduce #1 and #2 take 10,
# 20, 12 and 18 us; their steps account for 46 of the 60 us), and the totals per step kind.
#   braid_trace_summary.sh BRAID_TRACE FIXTURES PYTHON3
. "$(dirname "$0")/braid_trace_preamble.sh"
report steps
has "wait 6.5 us (43.3%), copy 3.5 us (23.3%), reduce 1.5 us (10.0%), unaccounted 3.5 us (23.3%)"
check_json steps '
rows = {(r["collective"], r["bytes"], r["algo"]): r for r in d["summary"]}
r = rows[("all_reduce", 4096, "ring")]
want = {"calls": 4, "mean_us": 15.0, "min_us": 10.0, "calls_with_steps": 4,
        "wait_us": 6.5, "copy_us": 3.5, "reduce_us": 1.5, "unaccounted_us": 3.5,
        "wait_pct": 43.3, "copy_pct": 23.3, "reduce_pct": 10.0, "unaccounted_pct": 23.3}
got = {k: r[k] for k in want}
assert got == want, got
kinds = {"send": {"steps": 4, "time_us": 18.0, "wait_us": 10.0, "copy_us": 8.0, "reduce_us": 0.0},
         "recv_reduce": {"steps": 4, "time_us": 36.0, "wait_us": 16.0, "copy_us": 6.0,
                         "reduce_us": 6.0}}
assert r["kinds"] == kinds, r["kinds"]
b = rows[("broadcast", 1024, "tree")]
assert (b["calls"], b["mean_us"], b["min_us"], b["calls_with_steps"]) == (2, 6.0, 5.0, 0), b
assert "wait_us" not in b, b
'
