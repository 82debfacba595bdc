#!/usr/bin/env python3
"""Checks a perf binary's -J file against the shape of nccl-tests' JSON output (version 2,
src/util.cu): one object whose keys come in nccl-tests' order, booleans written as the strings
"true"/"false", one result per table row, each with out_of_place and in_place (null for a
collective without an in-place form), the per-iteration objects with -I, and every value
checked (#wrong 0).

  perf_json_check.py FILE --ranks N [--processes P] --rows R [--per-iter] [--cputime]
                     [--no-in-place]

Exits 1 naming the first thing that differs.
"""
import argparse
import json
import re
import sys

TOP = ["version", "start_time", "args", "env", "nccl_version", "config", "results",
       "out_of_bounds", "average_bus_bandwidth", "errors", "end_time"]
CONFIG_HEAD = ["nthreads", "ngpus", "minimum_bytes", "maximum_bytes"]
CONFIG_TAIL = ["warmup_iters", "iterations", "aggregated_iterations", "validation", "graph",
               "blocking_collectives", "per_iter_timing", "parallel_init", "devices"]
DEVICE = ["rank", "group", "pid", "hostname", "device", "device_hex", "device_info"]
PER_ITER = ["min_us", "max_us", "avg_us", "p50_us", "p95_us", "p99_us", "stdev_us", "cv_pct",
            "times_us"]
TIME = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$")


def fail(msg):
    print(f"perf_json_check: {msg}", file=sys.stderr)
    sys.exit(1)


def keys(obj, want, where):
    got = [k for k, _ in obj]
    if got != want:
        fail(f"{where}: keys {got}, want {want}")
    return dict(obj)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--per-iter", action="store_true")
    ap.add_argument("--cputime", action="store_true")
    ap.add_argument("--no-in-place", action="store_true")
    a = ap.parse_args()
    with open(a.file, encoding="utf-8") as f:
        # Pairs, not dicts: the order of the keys is checked too.
        doc = json.load(f, object_pairs_hook=lambda pairs: pairs)
    top = keys(doc, TOP, "document")
    if top["version"] != 2 or not isinstance(top["nccl_version"], int):
        fail(f"version {top['version']}, nccl_version {top['nccl_version']}")
    for k in ("start_time", "end_time"):
        if not TIME.match(top[k]):
            fail(f"{k} {top[k]!r} is not YYYY-MM-DD HH:MM:SS")
    if not top["args"] or not all(isinstance(x, str) for x in top["args"]):
        fail("args is not a list of strings")
    for var in top["env"]:
        if not var.startswith(("NCCL_", "BRAID_")):
            fail(f"env holds {var.split('=')[0]}, which is not an NCCL_ or BRAID_ setting")
        for secret in ("BRAID_UNIQUE_ID=", "BRAID_COMM_SECRET="):
            if var.startswith(secret) and var != secret + "(withheld)":
                fail(f"{secret[:-1]}'s secret is in env")
    config = dict(top["config"])
    step = "step_factor" if "step_factor" in config else "step_bytes"
    config = keys(top["config"], CONFIG_HEAD + [step] + CONFIG_TAIL, "config")
    for k in ("blocking_collectives", "per_iter_timing", "parallel_init"):
        if config[k] not in ("true", "false"):
            fail(f"config.{k} is {config[k]!r}, not the string true or false")
    if config["per_iter_timing"] != ("true" if a.per_iter else "false"):
        fail(f"config.per_iter_timing {config['per_iter_timing']}")
    devices = [keys(d, DEVICE, "device") for d in config["devices"]]
    if [d["rank"] for d in devices] != list(range(a.ranks)):
        fail(f"devices of ranks {[d['rank'] for d in devices]}, want 0..{a.ranks - 1}")
    if len(top["results"]) != a.rows:
        fail(f"{len(top['results'])} results, want {a.rows}")
    time_key = "cpu_time" if a.cputime else "time"
    for row in top["results"]:
        want = ["size", "count", "type", "redop", "root", "out_of_place"]
        want += ["out_of_place_per_iter"] if a.per_iter else []
        want += ["in_place"] + (["in_place_per_iter"] if a.per_iter and not a.no_in_place else [])
        want += ["actual_iterations", "experiment_name"]
        r = keys(row, want, "result")
        if not isinstance(r["root"], str) or not isinstance(r["size"], int):
            fail(f"root {r['root']!r} (nccl-tests writes it as text), size {r['size']!r}")
        placements = ["out_of_place"] + ([] if a.no_in_place else ["in_place"])
        if a.no_in_place and r["in_place"] is not None:
            fail("in_place is not null for a collective without an in-place form")
        for p in placements:
            m = keys(r[p], [time_key, "alg_bw", "bus_bw", "nwrong"], p)
            if m["nwrong"] != 0 or m[time_key] <= 0:
                fail(f"{p}: {m}")
            if a.per_iter:
                want_iter = PER_ITER + (["per_process_max_times_us"] if a.processes > 1 else [])
                it = keys(r[p + "_per_iter"], want_iter, p + "_per_iter")
                if len(it["times_us"]) != r["actual_iterations"]:
                    fail(f"{len(it['times_us'])} times, {r['actual_iterations']} iterations")
                if not it["min_us"] <= it["p50_us"] <= it["p99_us"] <= it["max_us"]:
                    fail(f"{p}_per_iter out of order: {it}")
                if a.processes > 1:
                    rows = it["per_process_max_times_us"]
                    if len(rows) != a.processes or any(len(x) != len(it["times_us"]) for x in rows):
                        fail(f"per_process_max_times_us shaped {[len(x) for x in rows]}")
    oob = keys(top["out_of_bounds"], ["count", "okay"], "out_of_bounds")
    if oob != {"count": 0, "okay": "true"}:
        fail(f"out_of_bounds {oob}")
    keys(top["average_bus_bandwidth"], ["bandwidth", "okay"], "average_bus_bandwidth")
    if not isinstance(top["errors"], list):
        fail("errors is not a list")
    print(f"perf_json_check: {a.file}: {len(top['results'])} results, nccl-tests' shape")


if __name__ == "__main__":
    main()
