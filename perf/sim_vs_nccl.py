#!/usr/bin/env python3
"""braid-sim against NCCL's own nccl-tests logs and NCCL's published figures (issues 6 and 37).

For every log in $BRAID_SHARED_DIR/nccl-tests-logs (default ../shared): the machine, host count
and NICs its README gives (the table below), runs braid-sim for the logged sizes of 256 MiB and
above and prints, per size, the logged busbw (the mean of nccl-tests' out-of-place and in-place
columns: the model predicts one call), the busbw braid-sim predicts for the algorithm it would
choose (NCCL's device algorithms NVLS, NVLSTree and PAT among them), and the error; then the
same for NCCL's published figures (PUBLISHED, with their sources). Every row must be within
15%: the script exits 1 otherwise. --markdown FILE writes the table as Markdown (README.md's).

Usage: perf/sim_vs_nccl.py BRAID_SIM [--json FILE] [--markdown FILE]
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
    ("aws_2x-p4de.24xlarge_16xA100-80GB_EFA_all_reduce_perf.txt", "allreduce",
     "topologies/nccl/aws_p4de-24xl-topo.xml", ["--hosts", "2"],
     "2 x p4de.24xlarge: 8 A100 on NVSwitch, 4 x 100G EFA per host"),
    ("aws_2x-p5.48xlarge_16xH100_EFA_all_reduce_perf.txt", "allreduce",
     "topologies/nccl/aws_p5.48xl-topo.PR1226-unmerged.xml", ["--hosts", "2", "--nvswitch", "18"],
     "2 x p5.48xlarge: 8 H100 SXM5 (18 NVLinks to NVSwitch; the file lists none), 32 x 100G EFA"),
    ("oci_BM.GPU.B300.8_01_All-Reduce-Single-Node.txt", "allreduce",
     "systems/oci_bm_gpu_b300_8-topo.xml", ["--hosts", "1"],
     "1 x BM.GPU.B300.8: 8 B300 on NVLink5 switches"),
    ("oci_BM.GPU.B300.8_02_All-Reduce-2-Nodes.txt", "allreduce",
     "systems/oci_bm_gpu_b300_8-topo.xml", ["--hosts", "2"],
     "2 x BM.GPU.B300.8: 8 B300, 16 x 400G RoCE per host"),
    ("oci_BM.GPU.B300.8_03_All-to-All-Single-Node.txt", "alltoall",
     "systems/oci_bm_gpu_b300_8-topo.xml", ["--hosts", "1"],
     "1 x BM.GPU.B300.8: 8 B300 on NVLink5 switches"),
    ("oci_BM.GPU.B300.8_04_All-to-All-2-Nodes.txt", "alltoall",
     "systems/oci_bm_gpu_b300_8-topo.xml", ["--hosts", "2"],
     "2 x BM.GPU.B300.8: 8 B300, 16 x 400G RoCE per host"),
    ("oci_BM.GPU.GB300.4_01_NCCL-All-Reduce-Scale-Performance-Single-Node.txt", "allreduce",
     "systems/oci_bm_gpu_gb300_4-topo.xml", ["--hosts", "1"],
     "1 x BM.GPU.GB300.4: 4 B300 on the NVL72 rack's NVLink"),
    ("oci_BM.GPU.GB300.4_02_NCCL-All-Reduce-Scale-Performance-2-Nodes-on-a-Single-Rack.txt",
     "allreduce", "systems/oci_bm_gpu_gb300_4-topo.xml", ["--hosts", "2", "--mnnvl"],
     "2 x BM.GPU.GB300.4 in one rack: 8 B300 in one NVLink domain (MNNVL)"),
    ("oci_BM.GPU.GB300.4_05_NCCL-All-to-All-Single-Node.txt", "alltoall",
     "systems/oci_bm_gpu_gb300_4-topo.xml", ["--hosts", "1"],
     "1 x BM.GPU.GB300.4: 4 B300 on the NVL72 rack's NVLink"),
    ("oci_BM.GPU.GB300.4_06_NCCL-All-to-All-Scale-Performance-2-Hosts-Single-Rack.txt",
     "alltoall", "systems/oci_bm_gpu_gb300_4-topo.xml", ["--hosts", "2", "--mnnvl"],
     "2 x BM.GPU.GB300.4 in one rack: 8 B300 in one NVLink domain (MNNVL)"),
]
# NCCL's published figures: (what, collective, topology, options, bytes, busbw GB/s, source).
PUBLISHED = [
    ("DGX H100, NVLS (8 H100 SXM5 on NVSwitch)", "allreduce",
     "topologies/nccl/aws_p5.48xl-topo.PR1226-unmerged.xml", ["--hosts", "1", "--nvswitch", "18"],
     8 << 30, 480.0,
     "NVIDIA: NVLink SHARP all-reduce on DGX H100, about 480 GB/s busbw at large sizes "
     "(NCCL 2.17+; the figure issue 37 quotes)"),
    ("GB200 NVL72, 2 trays x 4 GPUs over MNNVL", "allreduce",
     "systems/oci_bm_gpu_gb300_4-topo.xml", ["--hosts", "2", "--mnnvl"], 8 << 30, 811.0,
     "lixueduan.com/posts/ai/13-gb200-mnnvl-nccl-test (2025): nccl-tests on 2 GB200 NVL72 "
     "compute trays, 8 GPUs over multi-node NVLink, 811 GB/s all-reduce busbw at large sizes; "
     "the GB300 tray's file stands for GB200's (the same 18 NVLink5 links per GPU)"),
]
MIN_BYTES = 256 << 20
TOLERANCE = 0.15

# An nccl-tests row, optionally prefixed by a rank tag ("0: "): size count type redop root
# time algbw busbw #wrong (out of place), then the same in place.
ROW = re.compile(r"^\s*(?:\d+:\s+)?(\d+)\s+(\d+)\s+\w+\s+\w+\s+-?\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)"
                 r"\s+\S+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s")


def logged(path):
    rows = {}
    with open(path) as f:
        for line in f:
            m = ROW.match(line)
            if m and int(m.group(1)) >= MIN_BYTES:
                rows[int(m.group(1))] = (float(m.group(5)) + float(m.group(8))) / 2
    return rows


def predicted(sim, coll, topo, opts, sizes):
    """{bytes: (chosen, busbw)} from braid-sim's text table."""
    run = subprocess.run([sim, "--topo", topo, *opts, "--collective", coll, "-b", str(min(sizes)),
                          "-e", str(max(sizes)), "-f", "2"], capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"{sim} --topo {topo} {' '.join(opts)} failed ({run.returncode}): "
                           f"{run.stderr.strip()}")
    out = run.stdout
    names, result = None, {}
    for line in out.splitlines():
        f = line.split()
        # Header: size, count, one column per algorithm, then piece and chosen.
        if line.startswith("#") and len(f) > 4 and f[1] == "size" and f[2] == "count":
            names = [n.rstrip("*") for n in f[3:-2]]  # '*': NCCL's device algorithms
        elif not line.startswith("#") and names and len(f) >= 2 + len(names) + 2:
            # Each algorithm's cell is "time busbw", or "n/a" where it cannot run the call.
            cells, k = {}, 2
            for name in names:
                if f[k] == "n/a":
                    k += 1
                else:
                    cells[name] = float(f[k + 1])
                    k += 2
            chosen = f[-1]
            if chosen in cells:
                result[int(f[0])] = (chosen, cells[chosen])
    return result


def size_label(b):
    for unit, shift in (("GiB", 30), ("MiB", 20)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift} {unit}"
    return str(b)


def main():
    parser = argparse.ArgumentParser(description="braid-sim against NCCL's nccl-tests logs")
    parser.add_argument("braid_sim", help="the braid-sim binary (build/tools/braid-sim)")
    parser.add_argument("--json", metavar="FILE", help="also write the comparison as JSON")
    parser.add_argument("--markdown", metavar="FILE", help="also write the table as Markdown")
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
    # Every log of the folder must be in SYSTEMS: a new log is a row to predict, not to skip.
    known = {entry[0] for entry in SYSTEMS}
    unknown = sorted(f for f in os.listdir(logs) if f.endswith(".txt") and f not in known)
    if unknown:
        print(f"sim_vs_nccl: {', '.join(unknown)}: no system in SYSTEMS for this log",
              file=sys.stderr)
        return 1
    cases = []  # (label, collective, topology path, options, {bytes: measured}, what, source)
    for log, coll, topo, opts, what in SYSTEMS:
        root = HERE if topo.startswith("systems/") else SHARED
        path = os.path.join(logs, log)
        if not os.path.isfile(path):
            print(f"sim_vs_nccl: {path}: missing", file=sys.stderr)
            return 2
        rows = logged(path)
        if not rows:
            print(f"sim_vs_nccl: {log}: no rows of 256 MiB or more", file=sys.stderr)
            return 1
        cases.append((log, coll, topo, os.path.join(root, topo), opts, rows, what, log))
    for what, coll, topo, opts, size, busbw, source in PUBLISHED:
        path = os.path.join(HERE if topo.startswith("systems/") else SHARED, topo)
        if not os.path.isfile(path):
            print(f"sim_vs_nccl: {path}: missing", file=sys.stderr)
            return 2
        cases.append((what, coll, topo, path, opts, {size: busbw}, what, source))
    report, table, bad = [], [], 0
    for label, coll, topo, path, opts, rows, what, source in cases:
        try:
            pred = predicted(sim, coll, path, opts, sorted(rows))
        except (OSError, RuntimeError) as e:
            print(f"sim_vs_nccl: {e}", file=sys.stderr)
            return 1
        missing = [s for s in rows if s not in pred]
        if missing:
            print(f"sim_vs_nccl: braid-sim gave no row for {missing} bytes of {label}",
                  file=sys.stderr)
            return 1
        print(f"# {label}\n#   {what}; {coll}; braid-sim --topo {topo} {' '.join(opts)}")
        print(f"#   {'bytes':>12} {'NCCL busbw':>10} {'braid-sim':>10} {'error':>7}  chosen")
        for size in sorted(rows):
            chosen, bw = pred[size]
            err = bw / rows[size] - 1
            ok = abs(err) <= TOLERANCE
            bad += not ok
            print(f"    {size:>12} {rows[size]:>10.1f} {bw:>10.1f} {err:>+7.1%}  {chosen}"
                  f"{'' if ok else '  OUTSIDE'}")
            table.append((what, coll, size, rows[size], bw, err, chosen, source))
            report.append({"source": source, "collective": coll, "topology": topo,
                           "options": opts, "bytes": size, "nccl_busbw": rows[size],
                           "predicted_busbw": bw, "error": err, "chosen": chosen})
    print(f"# {len(table) - bad} of {len(table)} rows predicted within {TOLERANCE:.0%}")
    if jsonPath:
        with open(jsonPath, "w") as f:
            json.dump(report, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("| system | collective | size | NCCL busbw | braid-sim | error | chosen |\n")
            f.write("|---|---|---:|---:|---:|---:|---|\n")
            for what, coll, size, nccl, bw, err, chosen, source in table:
                f.write(f"| {what.split(':')[0].split(' (')[0]} | {coll} | {size_label(size)} | {nccl:.1f} | {bw:.1f} | "
                        f"{err:+.1%} | {chosen} |\n")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
