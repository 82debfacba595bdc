#!/usr/bin/env python3
"""Checks a Trace Event Format file as chrome://tracing and Perfetto read it (the JSON object
form): traceEvents is a list; every event has name, ph, ts, pid and tid; a complete event (ph X)
has a numeric dur >= 0 and a numeric ts; every pid with events has a process_name metadata
event, and every (pid, tid) of an X event a thread_name one.

    trace_event_check.py FILE     exit 0 when valid, 1 with a message naming the first faults

braid-trace's timeline (tests/cli/braid_trace_timeline.sh) and the library's own dumps' tests
use it."""
import json
import numbers
import sys

MAX_FAULTS = 10


def faults_of(doc):
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["the top level is not an object with a traceEvents list"]
    faults, named_pids, named_threads, used = [], set(), set(), set()
    for i, e in enumerate(doc["traceEvents"]):
        if not isinstance(e, dict):
            faults.append("event %d is not an object" % i)
            continue
        missing = [k for k in ("name", "ph", "ts", "pid", "tid") if k not in e]
        if missing:
            faults.append("event %d (%s) has no %s" % (i, e.get("name"), ", ".join(missing)))
            continue
        if not isinstance(e["ts"], numbers.Real):
            faults.append("event %d (%s): ts is not a number" % (i, e["name"]))
        if e["ph"] == "M":
            if not isinstance(e.get("args", {}).get("name", ""), str):
                faults.append("event %d: metadata args.name is not a string" % i)
            if e["name"] == "process_name":
                named_pids.add(e["pid"])
            elif e["name"] == "thread_name":
                named_threads.add((e["pid"], e["tid"]))
        elif e["ph"] == "X":
            dur = e.get("dur")
            if not isinstance(dur, numbers.Real) or isinstance(dur, bool) or dur < 0:
                faults.append("event %d (%s): X event without a numeric dur >= 0" % (i, e["name"]))
            used.add((e["pid"], e["tid"]))
    faults += ["pid %s has events but no process_name" % p
               for p in sorted({p for p, _ in used} - named_pids, key=str)]
    faults += ["pid %s tid %s has events but no thread_name" % t
               for t in sorted(used - named_threads, key=str)]
    return faults


def main():
    if len(sys.argv) != 2:
        print("usage: trace_event_check.py FILE", file=sys.stderr)
        return 2
    try:
        with open(sys.argv[1]) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print("%s: not readable as JSON: %s" % (sys.argv[1], e))
        return 1
    faults = faults_of(doc)
    if faults:
        print("%s: %d fault(s) in the trace events:" % (sys.argv[1], len(faults)))
        for f in faults[:MAX_FAULTS]:
            print("  " + f)
        return 1
    n = len(doc["traceEvents"])
    print("%s: %d events, valid Trace Event Format" % (sys.argv[1], n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
