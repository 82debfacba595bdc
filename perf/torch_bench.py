#!/usr/bin/python3
"""Braid's torch.distributed backend ("braid", python/braid_torch) against Gloo, in one run.

Usage:
    PYTHONPATH=build/python /usr/bin/python3 perf/torch_bench.py            # full: 2 and 4 ranks, 8 B..256 MiB
    PYTHONPATH=build/python /usr/bin/python3 perf/torch_bench.py --quick    # smoke run, well under 30 s
    perf/torch_bench.py --ranks 2,4 --min-bytes 8 --max-bytes 256M --factor 2 \
        --iters 50 --warmup 5 --csv /tmp/torch_bench.csv --png /tmp/torch_bench.png

Each rank is a process (env://, MASTER_ADDR=127.0.0.1 and a free MASTER_PORT). It inits the
default group with backend "braid" and a second group with new_group(backend="gloo"), and
times both on the same tensors, alternately (braid then gloo, then gloo then braid, per size),
so that both see the same machine conditions. What it measures:

  * all_reduce (SUM, float32), all_gather_into_tensor and reduce_scatter_tensor over the size
    range. The time of a call is measured as nccl-tests does: warm-up calls, a barrier, N calls
    timed, the average per call on each rank, then the maximum over ranks. size is the whole
    buffer as nccl-tests defines it (all_reduce: the tensor; all_gather: the output, n blocks;
    reduce_scatter: the input, n blocks); algbw = size / time, busbw = algbw * 2(n-1)/n for
    all_reduce and algbw * (n-1)/n for all_gather and reduce_scatter. The speed-up is gloo's
    time / braid's. Where a block would be under one float32, it is one float32 (the size
    reported is the actual one). N shrinks at large sizes (--bytes-per-size) but not under
    --min-iters. The tensors hold zeros (repeated in-place sums stay finite and never
    denormal).
    Gloo in torch 1.13 has no _allgather_base or reduce_scatter: Gloo's all_gather_into_tensor
    falls back to all_gather into views of the output tensor, and its reduce_scatter_tensor is
    emulated as an all_reduce of the whole input followed by a copy of the rank's block (what
    a Gloo user has to do); the table marks these rows "gloo*".
  * the step time of DistributedDataParallel (forward, backward, optimizer step; median over
    --ddp-steps steps) for one MLP (about 4.7 M float32 parameters), the braid and the gloo
    model stepping alternately on the same batch.
  * memory: the peak RSS of each rank (resource.getrusage ru_maxrss) at the end, and the RSS
    (/proc/self/statm) growth across creating the default braid group, across creating a
    second braid communicator (new_group(backend="braid")) and its first all_reduce, and
    across creating the gloo group. Braid's own buffers per communicator are
    BRAID_BUFFSIZE (2 MiB by default) of shared memory per peer connection.

Targets (issue 33): at 1 MiB and above, at least 3x Gloo's throughput (speed-up >= 3); at
8 B, no slower than Gloo (speed-up >= 1); memory per communicator no more than Braid's own
buffers. The table marks each row's verdict.

Output: a plain table on stdout, --csv FILE (one row per op, rank count, size and backend),
and --png FILE (default /tmp/torch_bench.png): busbw against size, braid and gloo lines, one
panel per op per rank count. Without matplotlib the PNG is skipped with a note (Debian:
apt-get install -y --no-install-recommends python3-matplotlib) and the table is still printed.
"""
import argparse
import json
import math
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time

OPS = ["all_reduce", "all_gather", "reduce_scatter"]
ELEM = 4  # float32
MiB = 1 << 20


def parse_bytes(text):
    text = text.strip().upper().rstrip("B")
    mult = 1
    for suffix, m in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)):
        if text.endswith(suffix):
            text, mult = text[:-1], m
            break
    return int(float(text) * mult)


def human(n):
    for unit, m in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= m:
            v = n / m
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{n} B"


def rss_bytes():
    """The current resident set size, from /proc/self/statm."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def sizes(args):
    out, s = [], args.min_bytes
    while s <= args.max_bytes:
        out.append(s)
        s *= args.factor
    return out


def elements(op, size, world):
    """(input numel, output numel) of one call of op at nccl-tests' size (bytes)."""
    if op == "all_reduce":
        n = max(1, size // ELEM)
        return n, n
    block = max(1, size // ELEM // world)
    if op == "all_gather":
        return block, block * world
    return block * world, block  # reduce_scatter


def bus_factor(op, world):
    return 2 * (world - 1) / world if op == "all_reduce" else (world - 1) / world


# ---------------------------------------------------------------------------------------------
# A rank.

def worker(rank, world, args):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)  # the machine's cores are shared by the ranks
    rss0 = rss_bytes()
    import braid_torch  # noqa: F401  registers "braid"
    rss_import = rss_bytes()
    dist.init_process_group("braid", init_method="env://", rank=rank, world_size=world)
    rss_braid = rss_bytes()
    gloo = dist.new_group(backend="gloo")
    rss_gloo = rss_bytes()
    # A second braid communicator: what one more communicator costs, without the one-time
    # costs of the library (its first communicator's threads, the topology).
    before = rss_bytes()
    extra = dist.new_group(backend="braid")
    rss_extra_init = rss_bytes() - before
    t = torch.ones(1 << 20)  # 4 MiB: touches the connections' buffers
    before = rss_bytes()
    dist.all_reduce(t, group=extra)
    rss_extra_call = rss_bytes() - before
    assert t[0].item() == world, t[0].item()
    dist.destroy_process_group(extra)
    del t

    groups = {"braid": None, "gloo": gloo}

    def call(backend, op, inp, out):
        g = groups[backend]
        if op == "all_reduce":
            dist.all_reduce(inp, op=dist.ReduceOp.SUM, group=g)
        elif op == "all_gather":
            if backend == "braid":
                dist.all_gather_into_tensor(out, inp, group=g)
            else:  # Gloo (1.13) has no _allgather_base
                dist.all_gather(list(out.chunk(world)), inp, group=g)
        else:
            if backend == "braid":
                dist.reduce_scatter_tensor(out, inp, op=dist.ReduceOp.SUM, group=g)
            else:  # Gloo (1.13) has no reduce_scatter: all_reduce, keep this rank's block
                dist.all_reduce(inp, op=dist.ReduceOp.SUM, group=g)
                n = out.numel()
                out.copy_(inp[rank * n:(rank + 1) * n])

    # Sanity: each op gives Gloo's result once, at a small size.
    for op in OPS:
        n_in, n_out = elements(op, 4096, world)
        res = {}
        for b in groups:
            inp = torch.arange(n_in, dtype=torch.float32) % 7 + rank
            out = torch.zeros(n_out)
            call(b, op, inp, out)
            res[b] = inp if op == "all_reduce" else out
        assert torch.equal(res["braid"], res["gloo"]), f"{op}: braid's result is not gloo's"

    def timed(backend, op, inp, out, iters):
        dist.barrier(group=groups[backend])
        start = time.perf_counter()
        for _ in range(iters):
            call(backend, op, inp, out)
        return time.perf_counter() - start

    rows = []
    for size in sizes(args):
        for op in OPS:
            n_in, n_out = elements(op, size, world)
            actual = (n_out if op == "all_gather" else n_in) * ELEM
            inp = torch.zeros(n_in)
            out = torch.zeros(n_out) if op != "all_reduce" else inp
            iters = max(args.min_iters, min(args.iters, args.bytes_per_size // max(actual, 1)))
            total = {"braid": 0.0, "gloo": 0.0}
            count = {"braid": 0, "gloo": 0}
            for b in groups:
                for _ in range(args.warmup):
                    call(b, op, inp, out)
            # Alternate: braid, gloo, gloo, braid (two rounds of iters/2 each).
            half = max(1, iters // 2)
            for order in (("braid", "gloo"), ("gloo", "braid")):
                for b in order:
                    total[b] += timed(b, op, inp, out, half)
                    count[b] += half
            avg = torch.tensor([total["braid"] / count["braid"], total["gloo"] / count["gloo"]],
                               dtype=torch.float64)
            dist.all_reduce(avg, op=dist.ReduceOp.MAX, group=gloo)  # max over ranks
            rows.append({"op": op, "ranks": world, "bytes": actual, "iters": count["braid"],
                         "braid_s": avg[0].item(), "gloo_s": avg[1].item()})
            del inp, out

    # DDP: one MLP, braid's copy and gloo's copy step alternately on the same batches.
    ddp = None
    if args.ddp_steps > 0:
        from torch.nn.parallel import DistributedDataParallel as DDP

        def mlp():
            torch.manual_seed(0)
            return torch.nn.Sequential(
                torch.nn.Linear(1024, 2048), torch.nn.ReLU(),
                torch.nn.Linear(2048, 1024), torch.nn.ReLU(),
                torch.nn.Linear(1024, 512), torch.nn.ReLU(),
                torch.nn.Linear(512, 10))
        models = {b: DDP(mlp(), process_group=groups[b] or dist.group.WORLD) for b in groups}
        opts = {b: torch.optim.SGD(m.parameters(), lr=0.01) for b, m in models.items()}
        params = sum(p.numel() for p in models["braid"].parameters())
        gen = torch.Generator().manual_seed(rank)
        steps = {b: [] for b in groups}
        for step in range(args.ddp_warmup + args.ddp_steps):
            x = torch.randn(args.ddp_batch, 1024, generator=gen)
            y = torch.randint(0, 10, (args.ddp_batch,), generator=gen)
            order = ("braid", "gloo") if step % 2 == 0 else ("gloo", "braid")
            for b in order:
                dist.barrier(group=gloo)
                start = time.perf_counter()
                opts[b].zero_grad()
                loss = torch.nn.functional.cross_entropy(models[b](x), y)
                loss.backward()
                opts[b].step()
                took = time.perf_counter() - start
                if step >= args.ddp_warmup:
                    steps[b].append(took)
        med = torch.tensor([statistics.median(steps["braid"]), statistics.median(steps["gloo"])],
                           dtype=torch.float64)
        dist.all_reduce(med, op=dist.ReduceOp.MAX, group=gloo)
        # Both copies started equal and saw the same gradients: equal weights (up to the order
        # of float sums).
        diff = max((pb - pg).abs().max().item() for pb, pg in
                   zip(models["braid"].parameters(), models["gloo"].parameters()))
        ddp = {"params": params, "batch": args.ddp_batch, "steps": args.ddp_steps,
               "braid_s": med[0].item(), "gloo_s": med[1].item(), "max_weight_diff": diff}

    dist.barrier(group=gloo)
    mem = {"rank": rank, "rss_start": rss0, "import": rss_import - rss0,
           "braid_init": rss_braid - rss_import, "gloo_init": rss_gloo - rss_braid,
           "extra_braid_init": rss_extra_init, "extra_braid_first_call": rss_extra_call,
           "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    mems = [None] * world
    dist.all_gather_object(mems, mem, group=gloo)
    dist.destroy_process_group(gloo)
    dist.destroy_process_group()
    if rank == 0:
        with open(args.result, "w") as f:
            json.dump({"rows": rows, "ddp": ddp, "mem": mems}, f)


# ---------------------------------------------------------------------------------------------
# The launcher and the report.

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(world, args, tmp):
    result = os.path.join(tmp, f"result-{world}.json")
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               WORLD_SIZE=str(world))
    argv = [sys.executable, os.path.abspath(__file__), "--worker-result", result] + \
        [a for a in sys.argv[1:]]
    procs = [subprocess.Popen(argv, env=dict(env, RANK=str(r))) for r in range(world)]
    deadline = time.monotonic() + args.timeout
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            codes.append("timeout")
    if any(c != 0 for c in codes):
        raise SystemExit(f"{world} ranks: exit codes {codes}")
    with open(result) as f:
        return json.load(f)


def verdict(row, smallest):
    """The issue's targets for one row: '' where none applies. The 8 B target applies to the
    op's smallest size (8 B, or one float32 per rank where that is more: all_gather and
    reduce_scatter at 4 ranks start at 16 B)."""
    speedup = row["gloo_s"] / row["braid_s"]
    if row["bytes"] >= MiB:
        return "ok (>=3x)" if speedup >= 3 else "MISS (<3x)"
    if row["bytes"] == smallest and row["bytes"] <= max(8, ELEM * row["ranks"]):
        return "ok (>=1x)" if speedup >= 1 else "MISS (<1x)"
    return ""


def buffsize():
    """BRAID_BUFFSIZE (or NCCL_BUFFSIZE) as Braid reads it, else its default, 2 MiB."""
    v = os.environ.get("BRAID_BUFFSIZE") or os.environ.get("NCCL_BUFFSIZE")
    try:
        return parse_bytes(v) if v else 2 * MiB
    except ValueError:
        return 2 * MiB


def report(results, args):
    lines = []
    out = lines.append
    out(f"{'op':<15}{'ranks':>5}{'size':>10}{'iters':>6}"
        f"{'braid us':>11}{'busbw GB/s':>11}{'gloo us':>11}{'busbw GB/s':>11}"
        f"{'speed-up':>9}  target")
    csv = ["op,ranks,bytes,iters,backend,time_us,algbw_GBps,busbw_GBps,speedup"]
    for world, res in results.items():
        smallest = {op: min(r["bytes"] for r in res["rows"] if r["op"] == op)
                    for op in OPS if any(r["op"] == op for r in res["rows"])}
        for row in res["rows"]:
            bf = bus_factor(row["op"], world)
            bw = {b: row["bytes"] / row[f"{b}_s"] / 1e9 for b in ("braid", "gloo")}
            speedup = row["gloo_s"] / row["braid_s"]
            gname = "gloo*" if row["op"] != "all_reduce" else "gloo"
            out(f"{row['op']:<15}{world:>5}{human(row['bytes']):>10}{row['iters']:>6}"
                f"{row['braid_s'] * 1e6:>11.1f}{bw['braid'] * bf:>11.3f}"
                f"{row['gloo_s'] * 1e6:>11.1f}{bw['gloo'] * bf:>11.3f}"
                f"{speedup:>8.2f}x  {verdict(row, smallest[row['op']])}")
            for b in ("braid", "gloo"):
                csv.append(f"{row['op']},{world},{row['bytes']},{row['iters']},"
                           f"{b if b == 'braid' else gname},{row[f'{b}_s'] * 1e6:.3f},"
                           f"{bw[b]:.6f},{bw[b] * bf:.6f},{speedup:.4f}")
    out("(size: the whole buffer as nccl-tests counts it; time: max over ranks of the average "
        "per call; busbw in GB/s = 1e9 B/s; gloo* = Gloo's all_gather into views / all_reduce "
        "+ copy, as Gloo 1.13 has no _allgather_base or reduce_scatter)")
    out("")
    for world, res in results.items():
        d = res["ddp"]
        if d:
            out(f"DDP step, {world} ranks: MLP of {d['params'] / 1e6:.2f} M float32 parameters, "
                f"batch {d['batch']}, median of {d['steps']} steps (max over ranks): braid "
                f"{d['braid_s'] * 1e3:.1f} ms, gloo {d['gloo_s'] * 1e3:.1f} ms, speed-up "
                f"{d['gloo_s'] / d['braid_s']:.2f}x (weights' largest difference "
                f"{d['max_weight_diff']:.2g})")
            csv.append(f"ddp_step,{world},{d['params'] * 4},{d['steps']},braid,"
                       f"{d['braid_s'] * 1e6:.3f},,,{d['gloo_s'] / d['braid_s']:.4f}")
            csv.append(f"ddp_step,{world},{d['params'] * 4},{d['steps']},gloo,"
                       f"{d['gloo_s'] * 1e6:.3f},,,{d['gloo_s'] / d['braid_s']:.4f}")
    out("")
    out("Memory per rank (MiB; RSS from /proc/self/statm, peak from ru_maxrss):")
    out(f"{'ranks':>5}{'rank':>5}{'start':>8}{'+braid':>8}{'+gloo':>8}"
        f"{'+braid#2':>9}{'+1st call':>10}{'peak':>8}")
    for world, res in results.items():
        for m in res["mem"]:
            out(f"{world:>5}{m['rank']:>5}{m['rss_start'] / MiB:>8.1f}"
                f"{m['braid_init'] / MiB:>8.1f}{m['gloo_init'] / MiB:>8.1f}"
                f"{m['extra_braid_init'] / MiB:>9.1f}{m['extra_braid_first_call'] / MiB:>10.1f}"
                f"{m['peak_rss'] / MiB:>8.1f}")
    out("(start: after importing torch; +braid: init_process_group(\"braid\") (with importing "
        "braid_torch); +gloo: new_group(backend=\"gloo\"); +braid#2: a second braid "
        "communicator (new_group(backend=\"braid\")); +1st call: its first all_reduce of "
        "4 MiB)")
    b = buffsize()
    for world, res in results.items():
        grow = max(m["extra_braid_init"] + m["extra_braid_first_call"] for m in res["mem"])
        own, peers = world * b, (world - 1) * b
        ok = "holds" if grow <= own else ("holds only counting the peers' FIFOs it writes"
                                          if grow <= own + peers else "MISS")
        out(f"{world} ranks: one more communicator, created and used once, grew RSS by at most "
            f"{grow / MiB:.1f} MiB; Braid's buffers: its shared segment, {world} FIFOs of "
            f"BRAID_BUFFSIZE {human(b)} = {human(own)}, and the {world - 1} FIFO(s) it writes in "
            f"its peers' segments ({human(peers)}, counted in RSS too): target {ok}")
    print("\n".join(lines), flush=True)
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("\n".join(csv) + "\n")
    return lines


def plot(results, args):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no PNG: matplotlib is not installed (Debian: apt-get install -y "
              "--no-install-recommends python3-matplotlib; or pip install matplotlib)")
        return
    worlds = list(results)
    fig, axes = plt.subplots(len(worlds), len(OPS), figsize=(5 * len(OPS), 3.6 * len(worlds)),
                             squeeze=False)
    for i, world in enumerate(worlds):
        for j, op in enumerate(OPS):
            ax = axes[i][j]
            rows = [r for r in results[world]["rows"] if r["op"] == op]
            bf = bus_factor(op, world)
            x = [r["bytes"] for r in rows]
            for b, style in (("braid", "o-"), ("gloo", "s--")):
                ax.plot(x, [r["bytes"] / r[f"{b}_s"] / 1e9 * bf for r in rows], style,
                        label=b if b == "braid" or op == "all_reduce" else "gloo*",
                        markersize=3)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{op}, {world} ranks")
            ax.set_xlabel("size (bytes)")
            ax.set_ylabel("busbw (GB/s)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend()
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    print(f"PNG: {args.png}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", default="2,4", help="rank counts, comma-separated (2,4)")
    p.add_argument("--min-bytes", type=parse_bytes, default=8, help="smallest size (8)")
    p.add_argument("--max-bytes", type=parse_bytes, default=256 * MiB, help="largest (256M)")
    p.add_argument("--factor", type=int, default=2, help="size step (2; 4 also fine)")
    p.add_argument("--iters", type=int, default=50, help="timed calls per size, at most (50)")
    p.add_argument("--min-iters", type=int, default=4, help="timed calls per size, at least (4)")
    p.add_argument("--bytes-per-size", type=parse_bytes, default=1 << 30,
                   help="timed calls per size are cut to about this many bytes (1G)")
    p.add_argument("--warmup", type=int, default=5, help="untimed calls per size (5)")
    p.add_argument("--ddp-steps", type=int, default=20, help="timed DDP steps (20; 0: none)")
    p.add_argument("--ddp-warmup", type=int, default=3)
    p.add_argument("--ddp-batch", type=int, default=64)
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 8 B..2 MiB in x4 steps, few calls, 2 ranks, 3 DDP steps")
    p.add_argument("--csv", help="write the results as CSV here")
    p.add_argument("--png", default="/tmp/torch_bench.png", help="busbw plot (/tmp/torch_bench.png)")
    p.add_argument("--timeout", type=float, default=3600, help="seconds per rank count (3600)")
    p.add_argument("--worker-result", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.quick:
        args.max_bytes, args.factor, args.iters, args.min_iters = 2 * MiB, 4, 10, 2
        args.warmup, args.ddp_steps, args.ddp_warmup, args.ddp_batch = 2, 3, 1, 16
        if "--ranks" not in " ".join(sys.argv):
            args.ranks = "2"
    if args.worker_result:
        args.result = args.worker_result
        worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)
        return 0
    results = {}
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        for world in [int(w) for w in args.ranks.split(",")]:
            t0 = time.monotonic()
            results[world] = launch(world, args, tmp)
            print(f"# {world} ranks done in {time.monotonic() - t0:.0f} s", file=sys.stderr,
                  flush=True)
    print(f"# torch_bench: {' '.join(sys.argv)}; {os.cpu_count()} cores; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {time.monotonic() - start:.0f} s")
    report(results, args)
    plot(results, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
