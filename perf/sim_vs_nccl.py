#!/usr/bin/env python3
"""braid-sim against NCCL's own nccl-tests logs (issue "choosing the algorithm", acceptance 3).

For every all-reduce log in $BRAID_SHARED_DIR/nccl-tests-logs (default ../shared) whose system
has a topology file (the table below: the machine, host count and NICs its README gives),
runs braid-sim for the logged sizes of 256 MiB and above and prints, per size, the logged
busbw (out of place), the busbw braid-sim predicts for the algorithm it would choose, and the
error. A log counts as predicted when the median error over its sizes is within 20%; the
script exits 1 unless at least three quarters of the logs are.

Usage: perf/sim_vs_nccl.py BRAID_SIM [--json FILE]
Exit 77 (skipped, as meson counts it) when the shared logs are absent from the default place
(a user's fresh clone); 2 when BRAID_SHARED_DIR names a folder without them, or for bad
arguments.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("BRAID_SHARED_DIR", os.path.join(HERE, "..", "..", "shared"))
SHARED_GIVEN = "BRAID_SHARED_DIR" in os.environ

# log file -> (topology file, braid-sim options, what the system is). Topology files under
# topologies/ are the shared ones; systems/ are ours, written from the shapes' published facts.
SYSTEMS = [
    ("aws_2x-p4de.24xlarge_16xA100-80GB_EFA_all_reduce_perf.txt",
     "topologies/nccl/aws_p4de-24xl-topo.xml", ["--hosts", "2"],
     "2 x p4de.24xlarge: 8 A100 on NVSwitch, 4 x 100G EFA per host"),
    ("aws_2x-p5.48xlarge_16xH100_EFA_all_reduce_perf.txt",
     "topologies/nccl/aws_p5.48xl-topo.PR1226-unmerged.xml", ["--hosts", "2", "--nvswitch", "18"],
     "2 x p5.48xlarge: 8 H100 SXM5 (18 NVLinks to NVSwitch; the file lists none), 32 x 100G EFA"),
    ("oci_BM.GPU.B300.8_01_All-Reduce-Single-Node.txt",
     "systems/oci_bm_gpu_b300_8-topo.xml", ["--hosts", "1"],
     "1 x BM.GPU.B300.8: 8 B300 on NVLink5 switches"),
    ("oci_BM.GPU.B300.8_02_All-Reduce-2-Nodes.txt",
     "systems/oci_bm_gpu_b300_8-topo.xml", ["--hosts", "2"],
     "2 x BM.GPU.B300.8: 8 B300, 16 x 400G RoCE per host"),
    ("oci_BM.GPU.GB300.4_01_NCCL-All-Reduce-Scale-Performance-Single-Node.txt",
     "systems/oci_bm_gpu_gb300_4-topo.xml", ["--hosts", "1"],
     "1 x BM.GPU.GB300.4: 4 B300 on the NVL72 rack's NVLink"),
    ("oci_BM.GPU.GB300.4_02_NCCL-All-Reduce-Scale-Performance-2-Nodes-on-a-Single-Rack.txt",
     "systems/oci_bm_gpu_gb300_4-topo.xml", ["--hosts", "2", "--mnnvl"],
     "2 x BM.GPU.GB300.4 in one rack: 8 B300 in one NVLink domain (MNNVL)"),
]
MIN_BYTES = 256 << 20
TOLERANCE = 0.20

# An nccl-tests row, optionally prefixed by a rank tag ("0: "): size count type redop root
# time algbw busbw #wrong (out of place), then the same in place.
ROW = re.compile(r"^\s*(?:\d+:\s+)?(\d+)\s+(\d+)\s+\w+\s+\w+\s+-?\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s")


def logged(path):
    rows = {}
    with open(path) as f:
        for line in f:
            m = ROW.match(line)
            if m and int(m.group(1)) >= MIN_BYTES:
                rows[int(m.group(1))] = float(m.group(5))
    return rows


def predicted(sim, topo, opts, sizes):
    """{bytes: (chosen, busbw)} from braid-sim's text table."""
    run = subprocess.run([sim, "--topo", topo, *opts, "-b", str(min(sizes)), "-e", str(max(sizes)),
                          "-f", "2"], capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"{sim} --topo {topo} {' '.join(opts)} failed ({run.returncode}): "
                           f"{run.stderr.strip()}")
    out = run.stdout
    names, result = None, {}
    for line in out.splitlines():
        f = line.split()
        # Header: size, count, one column per algorithm, then piece and chosen.
        if line.startswith("#") and len(f) > 4 and f[1] == "size" and f[2] == "count":
            names = f[3:-2]
        elif not line.startswith("#") and names and len(f) == 2 + 2 * len(names) + 2:
            chosen = f[-1]
            i = names.index(chosen)
            result[int(f[0])] = (chosen, float(f[2 + 2 * i + 1]))
    return result


def main():
    parser = argparse.ArgumentParser(description="braid-sim against NCCL's nccl-tests logs")
    parser.add_argument("braid_sim", help="the braid-sim binary (build/tools/braid-sim)")
    parser.add_argument("--json", metavar="FILE", help="also write the comparison as JSON")
    args = parser.parse_args()
    sim, jsonPath = args.braid_sim, args.json
    if not (os.path.isfile(sim) and os.access(sim, os.X_OK)):
        print(f"sim_vs_nccl: {sim}: not an executable braid-sim", file=sys.stderr)
        return 2
    logs = os.path.join(SHARED, "nccl-tests-logs")
    if not os.path.isdir(logs):
        if SHARED_GIVEN:
            print(f"sim_vs_nccl: BRAID_SHARED_DIR={SHARED}: no nccl-tests-logs there",
                  file=sys.stderr)
            return 2
        print(f"sim_vs_nccl: skipped: {logs} is absent (set BRAID_SHARED_DIR)")
        return 77
    report, good = [], 0
    for log, topo, opts, what in SYSTEMS:
        root = HERE if topo.startswith("systems/") else SHARED
        path = os.path.join(logs, log)
        if not os.path.isfile(path):
            print(f"sim_vs_nccl: {path}: missing", file=sys.stderr)
            return 2
        rows = logged(path)
        if not rows:
            print(f"sim_vs_nccl: {log}: no all-reduce rows of 256 MiB or more", file=sys.stderr)
            return 1
        try:
            pred = predicted(sim, os.path.join(root, topo), opts, sorted(rows))
        except (OSError, RuntimeError) as e:
            print(f"sim_vs_nccl: {e}", file=sys.stderr)
            return 1
        missing = [s for s in rows if s not in pred]
        if missing:
            print(f"sim_vs_nccl: braid-sim gave no row for {missing} bytes of {log}",
                  file=sys.stderr)
            return 1
        print(f"# {log}\n#   {what}; braid-sim --topo {topo} {' '.join(opts)}")
        print(f"#   {'bytes':>12} {'NCCL busbw':>10} {'braid-sim':>10} {'error':>7}  chosen")
        errors = []
        for size in sorted(rows):
            chosen, bw = pred[size]
            err = bw / rows[size] - 1
            errors.append(err)
            print(f"    {size:>12} {rows[size]:>10.1f} {bw:>10.1f} {err:>+7.1%}  {chosen}")
        med = statistics.median(errors)
        ok = abs(med) <= TOLERANCE
        good += ok
        print(f"#   median error {med:+.1%}: {'within' if ok else 'outside'} {TOLERANCE:.0%}")
        report.append({"log": log, "topology": topo, "options": opts, "median_error": med,
                       "within": ok, "sizes": [{"bytes": s, "nccl_busbw": rows[s],
                                                "predicted_busbw": pred[s][1], "chosen": pred[s][0]}
                                               for s in sorted(rows)]})
    print(f"# {good} of {len(SYSTEMS)} logs predicted within {TOLERANCE:.0%} (median over sizes "
          f">= 256 MiB); at least three quarters needed")
    if jsonPath:
        with open(jsonPath, "w") as f:
            json.dump(report, f, indent=1)
    return 0 if good * 4 >= 3 * len(SYSTEMS) else 1


if __name__ == "__main__":
    sys.exit(main())
