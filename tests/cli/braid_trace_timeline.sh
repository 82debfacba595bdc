#!/bin/sh
# braid-trace's timeline: written by default as DIR/timeline.json (and said so), valid Trace
# Event Format by trace_event_check.py (which also refuses a broken file), one X event per call
# and step, a process per rank, times from 0; a second run ignores the timeline.json in DIR.
#   braid_trace_timeline.sh BRAID_TRACE FIXTURES PYTHON3 TRACE_EVENT_CHECK
. "$(dirname "$0")/braid_trace_preamble.sh"
check="$4"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for case in steps never_posted missing_dump; do
  cp -r "$fixtures/$case" "$tmp/$case"
  "$trace" "$tmp/$case" >"$tmp/out"
  grep -q "^Timeline: $tmp/$case/timeline.json " "$tmp/out"
  "$py" "$check" "$tmp/$case/timeline.json"
  # Read again with the timeline in the folder: it is not taken for a dump.
  "$trace" --no-timeline "$tmp/$case" >"$tmp/out"
  if grep -q "timeline.json" "$tmp/out"; then cat "$tmp/out"; exit 1; fi
done
"$py" - "$tmp/steps/timeline.json" "$tmp/never_posted/timeline.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
x = [e for e in ev if e["ph"] == "X"]
calls = [e for e in x if e["cat"] == "call"]
steps = [e for e in x if e["cat"] == "step"]
assert (len(calls), len(steps)) == (6, 8), (len(calls), len(steps))
assert min(e["ts"] for e in x) == 0, "times start at 0"
names = {e["pid"]: e["args"]["name"] for e in ev if e["name"] == "process_name"}
assert names == {0: "rank 0 (hostA)", 1: "rank 1 (hostA)"}, names
threads = {e["args"]["name"] for e in ev if e["name"] == "thread_name"}
assert threads == {"comm 5e6f7081 calls", "comm 5e6f7081 peer 0", "comm 5e6f7081 peer 1"}, threads
# Rank 1's wall clock is 500 ns ahead of rank 0's at the same monotonic reading.
first = {e["pid"]: e["ts"] for e in calls if e["name"] == "all_reduce #1"}
assert first == {0: 0.0, 1: 0.5}, first
s = [e for e in steps if e["pid"] == 0 and e["name"] == "recv_reduce 2048B"][0]
assert (s["ts"], s["dur"], s["args"]["wait_ns"]) == (3.0, 6.0, 2000), s
d = json.load(open(sys.argv[2]))
open_calls = [e for e in d["traceEvents"] if e.get("name") == "all_reduce #12"]
assert len(open_calls) == 3 and all("not finished" in e["args"]["state"] for e in open_calls)
assert all(e["dur"] > 1.99e6 for e in open_calls), open_calls
print("timeline: ok")
PY
# The checker refuses an X event without dur and a pid without a process_name.
echo '{"traceEvents":[{"name":"a","ph":"X","ts":0,"pid":1,"tid":1}]}' >"$tmp/bad.json"
if "$py" "$check" "$tmp/bad.json"; then exit 1; fi
