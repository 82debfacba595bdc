#!/usr/bin/python3
"""The torch.distributed backend "braid" (python/braid_torch) against Gloo, at 1, 2 and 4 ranks.

    torch_backend_test.py PACKAGE_DIR BUILT   (meson test --suite torch runs it)

Each rank is a process; the 1, 2 and 4 ranks start with file://, tcp:// and env://
(MASTER_ADDR=127.0.0.1, a free port) in turn. Each rank inits the default group with backend
"braid" and a second group with backend "gloo", runs every op on the same inputs in both, and
requires equal results (torch.equal: the inputs are small integers, so every sum, product and
mean is exact in every dtype). Gloo has no bfloat16 or bool: their expected results are Gloo's
in float32 and uint8, cast back (exact for these values); Gloo's all-gather of an empty tensor
dies, so there the expected blocks are empty tensors. Shapes: empty, a transposed (non-
contiguous) 3x5, and 1000 elements; all_to_all_single with split sizes and
all_gather_coalesced once per dtype; BAND, BOR and BXOR on the integer dtypes and bool;
batch_isend_irecv (one Braid group), all_reduce_coalesced and PREMUL_SUM against closed forms.
Then bad use at 3 ranks (misuse_worker): counts and dtypes that differ across ranks raise on
every rank, the group's timeout names a rank that stays away, a subgroup of two ranks works,
and a rank that dies is named. Exits 77 (skipped) when the build had no torch.
"""
import os
import socket
import subprocess
import sys
import tempfile
import time

DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "uint8", "int32", "int64", "bool"]
RANK_COUNTS = [1, 2, 4]
INIT_METHODS = ["file", "tcp", "env"]  # one per rank count


def inputs(dtype, rank, shape, scale=1):
    """Rank rank's input: small integers (negative ones in signed types), as dtype."""
    import torch
    n = 1
    for s in shape:
        n *= s
    i = torch.arange(n, dtype=torch.int64)
    if dtype == torch.bool:
        return ((i + rank) % 3 == 0).reshape(shape)
    v = (i * (rank + 3) + rank) % 4  # 0..3: a product over 4 ranks stays <= 81
    if dtype not in (torch.uint8,) and dtype.is_signed:
        v = v - 1  # -1..2
    return (v * scale).to(dtype).reshape(shape)


def shaped(t, transpose):
    """t itself, or a non-contiguous view of it (a transposed 5x3 seen as 3x5)."""
    return t.t() if transpose else t


def cases():
    """(shape, transposed) pairs: the tensor a call gets is shaped(inputs(...shape), transposed)."""
    return [((0,), False), ((5, 3), True), ((1000,), False)]


def gloo_type(dtype):
    """The dtype Gloo computes a dtype's expected result in: itself, float32 for bfloat16 and
    uint8 for bool, which Gloo lacks (exact here: the values are small integers; a bool's sum
    or product cast back to bool is its or or and, as torch's own bool arithmetic)."""
    import torch
    return {torch.bfloat16: torch.float32, torch.bool: torch.uint8}.get(dtype, dtype)


def check(name, got, want):
    import torch
    if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
        raise AssertionError(f"{name}: braid {got.flatten()[:12].tolist()} != "
                             f"gloo {want.flatten()[:12].tolist()} (dtype {got.dtype}, "
                             f"shape {tuple(got.shape)})")


def worker(rank, world):
    import torch
    import torch.distributed as dist
    import braid_torch  # noqa: F401  registers "braid"
    from torch.distributed import ReduceOp

    # Each rank count starts another way (run() sets BRAID_TEST_INIT): the store c10d makes for
    # it is all the backend needs.
    dist.init_process_group("braid", init_method=os.environ["BRAID_TEST_INIT"], rank=rank,
                            world_size=world)
    assert dist.get_backend() == "braid", dist.get_backend()
    gloo = dist.new_group(backend="gloo")
    ran = 0
    for dname in DTYPES:
        dtype = getattr(torch, dname)
        gtype = gloo_type(dtype)
        ops = [ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX]
        if not dtype.is_floating_point:  # integers and bool: Braid folds BAND, BOR, BXOR
            ops += [ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR]
        # all_to_all_single with split sizes: rank r sends j + 1 rows of 2 to rank j.
        rows = inputs(dtype, rank, (sum(range(1, world + 1)), 2))
        got = torch.zeros((world * (rank + 1), 2), dtype=dtype)
        want = torch.zeros_like(got.to(gtype))
        splits_in, splits_out = [j + 1 for j in range(world)], [rank + 1] * world
        dist.all_to_all_single(got, rows, splits_out, splits_in)
        dist.all_to_all_single(want, rows.to(gtype), splits_out, splits_in, group=gloo)
        check(f"all_to_all_single with split sizes {dname}", got, want.to(dtype))
        for shape, transposed in cases():
            def make(r=rank, scale=1, as_type=dtype):
                return shaped(inputs(dtype, r, shape, scale).to(as_type), transposed)

            tag = f"{dname} {shape}{' transposed' if transposed else ''}"
            for op in ops:
                a, b = make(), make(as_type=gtype)
                work = dist.all_reduce(a, op=op, async_op=True)
                work.wait()
                assert work.is_completed()
                assert work.is_success()  # (1.13 cannot return Work.exception() to Python)
                fut = work.get_future().wait()
                check(f"allreduce {op} {tag} (future)", fut[0], a)
                dist.all_reduce(b, op=op, group=gloo)
                check(f"allreduce {op} {tag} ({dname})", a, b.to(dtype))

                a, b = make(), make(as_type=gtype)
                dist.reduce(a, dst=world - 1, op=op)
                dist.reduce(b, dst=world - 1, op=op, group=gloo)
                if rank == world - 1:
                    check(f"reduce {op} {tag}", a, b.to(dtype))

                # Reduce-scatter: Gloo has none, so the expected block is Gloo's all-reduce of
                # the whole input, cut at this rank.
                ins = [make(scale=j + 1) for j in range(world)]
                out = torch.zeros_like(ins[0])
                dist.reduce_scatter(out, ins, op=op)
                want = torch.cat([t.reshape(-1) for t in ins]).to(gtype)
                dist.all_reduce(want, op=op, group=gloo)
                want = want.to(dtype)
                n = out.numel()
                check(f"reduce_scatter {op} {tag}", out,
                      want[rank * n:(rank + 1) * n].reshape(out.shape))
                flat_in = torch.cat([t.reshape(-1) for t in ins])
                flat_out = torch.zeros(n, dtype=dtype)
                dist._reduce_scatter_base(flat_out, flat_in, op=op)
                check(f"_reduce_scatter_base {op} {tag}", flat_out, want[rank * n:(rank + 1) * n])
                ran += 4
            if dtype != torch.bool:
                # AVG (Gloo has none): the inputs are multiples of world, so the mean is exact;
                # integers divide as torch.div's trunc.
                a, b = make(scale=world), make(scale=world, as_type=gtype)
                dist.all_reduce(a, op=ReduceOp.AVG)
                dist.all_reduce(b, op=ReduceOp.SUM, group=gloo)
                want = (b / world).to(dtype) if dtype.is_floating_point else \
                    torch.div(b, world, rounding_mode="trunc")
                check(f"allreduce AVG {tag}", a, want)

            root = world // 2
            a, b = make(), make(as_type=gtype)
            dist.broadcast(a, src=root)
            dist.broadcast(b, src=root, group=gloo)
            check(f"broadcast {tag}", a, b.to(dtype))

            outs = [torch.zeros_like(make()) for _ in range(world)]
            wants = [torch.zeros_like(make(as_type=gtype)) for _ in range(world)]
            dist.all_gather(outs, make())
            if make().numel() > 0:  # Gloo's all-gather of nothing dies (SIGFPE)
                dist.all_gather(wants, make(as_type=gtype), group=gloo)
            wants = [w.to(dtype) for w in wants]
            for j in range(world):
                check(f"allgather {tag} block {j}", outs[j], wants[j])
            flat = torch.zeros(world * make().numel(), dtype=dtype)
            dist._all_gather_base(flat, make())
            check(f"_allgather_base {tag}", flat, torch.cat([w.reshape(-1) for w in wants]))

            # Gather, scatter and all-to-all; where a block is empty, Gloo is not asked (as its
            # all-gather of nothing, it may die) and the expected blocks are empty.
            n = make().numel()
            root = world - 1
            outs = [torch.zeros_like(make()) for _ in range(world)] if rank == root else []
            # Gloo's gather and scatter take non-contiguous tensors in memory order (not the
            # values' order), so Gloo gets contiguous copies; the blocks are also checked
            # against the ranks' inputs.
            dense = torch.contiguous_format
            wants = [torch.zeros_like(make(as_type=gtype), memory_format=dense)
                     for _ in range(world)]
            dist.gather(make(), outs, dst=root)
            if n:
                dist.gather(make(as_type=gtype).contiguous(), wants if rank == root else [],
                            dst=root, group=gloo)
            for j, o in enumerate(outs):
                check(f"gather {tag} block {j}", o, wants[j].to(dtype))
                check(f"gather {tag} block {j} (input)", o, make(r=j))

            ins = [make(scale=j + 1) for j in range(world)] if rank == 0 else []
            out = torch.zeros_like(make())
            want = torch.zeros_like(make(as_type=gtype), memory_format=dense)
            dist.scatter(out, ins, src=0)
            if n:
                dist.scatter(want, [t.to(gtype).contiguous() for t in ins] if rank == 0 else [],
                             src=0, group=gloo)
            check(f"scatter {tag}", out, want.to(dtype))
            check(f"scatter {tag} (input)", out, make(r=0, scale=rank + 1))

            blocks = [make(scale=j + 1) for j in range(world)]
            flat_in = torch.cat([t.reshape(-1) for t in blocks])
            flat_out = torch.zeros_like(flat_in)
            want = torch.zeros_like(flat_in.to(gtype))
            dist.all_to_all_single(flat_out, flat_in)
            if n:
                dist.all_to_all_single(want, flat_in.to(gtype), group=gloo)
            want = want.to(dtype)
            check(f"all_to_all_single {tag}", flat_out, want)
            outs = [torch.zeros_like(make()) for _ in range(world)]
            dist.all_to_all(outs, blocks)
            for j in range(world):
                check(f"all_to_all {tag} block {j}", outs[j].reshape(-1), want[j * n:(j + 1) * n])

            if world > 1:
                # A ring: even ranks send first, odd ranks receive first.
                right, left = (rank + 1) % world, (rank - 1) % world
                got = torch.zeros_like(make())
                if rank % 2 == 0:
                    dist.send(make(), dst=right)
                    dist.recv(got, src=left)
                else:
                    dist.recv(got, src=left)
                    dist.send(make(), dst=right)
                check(f"recv {tag} from {left}", got, make(left))
            ran += 9

        # all_gather_coalesced: rank i's inputs land in list i, each as the rank made it.
        ins = [shaped(inputs(dtype, rank, (5, 3)), True), inputs(dtype, rank, (7,))]
        outs = [[torch.zeros_like(t) for t in ins] for _ in range(world)]
        dist.all_gather_coalesced(outs, ins)
        for i in range(world):
            check(f"all_gather_coalesced {dname} from {i}", outs[i][0],
                  shaped(inputs(dtype, i, (5, 3)), True))
            check(f"all_gather_coalesced {dname} from {i} (2)", outs[i][1],
                  inputs(dtype, i, (7,)))
        ran += 1

    ran += coalesced_and_premul(rank, world)
    # What Braid has not: a clear RuntimeError naming it.
    for call, why in [
            (lambda: dist.all_reduce(torch.ones(3, dtype=torch.int16)), "Short"),
            (lambda: dist.all_reduce(torch.ones(3), op=ReduceOp.BXOR), "BXOR"),
            (lambda: dist.recv(torch.ones(3)), "recvAnysource")]:
        try:
            call()
        except RuntimeError as e:
            if why.lower() not in str(e).lower():
                raise AssertionError(f"the error for {why} does not name it: {e}")
        else:
            raise AssertionError(f"{why}: no RuntimeError")

    dist.barrier()
    dist.destroy_process_group(gloo)
    dist.destroy_process_group()
    return ran


def coalesced_and_premul(rank, world):
    """batch_isend_irecv (one Braid group: every rank sends right and receives from the left
    with no order that could deadlock, 4 MiB each, also non-contiguous), all_reduce_coalesced
    and PREMUL_SUM, against closed forms."""
    import torch
    import torch.distributed as dist
    right, left = (rank + 1) % world, (rank - 1) % world
    big = torch.arange(1 << 20, dtype=torch.float32) + rank
    got = torch.zeros(1 << 20)
    side = torch.arange(12, dtype=torch.int64).reshape(3, 4) * (rank + 1)
    got_side = torch.zeros(4, 3, dtype=torch.int64).t()  # a non-contiguous receive
    ops = [dist.P2POp(dist.isend, big, right), dist.P2POp(dist.irecv, got, left),
           dist.P2POp(dist.isend, side, right), dist.P2POp(dist.irecv, got_side, left)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    check(f"batch_isend_irecv from {left}", got, torch.arange(1 << 20, dtype=torch.float32) + left)
    check(f"batch_isend_irecv from {left} (non-contiguous)", got_side,
          torch.arange(12, dtype=torch.int64).reshape(3, 4) * (left + 1))
    ts = [torch.full((3,), float(rank + 1)), torch.arange(5.0) * rank]
    dist.all_reduce_coalesced(ts)
    total = world * (world + 1) // 2
    check("all_reduce_coalesced (1)", ts[0], torch.full((3,), float(total)))
    check("all_reduce_coalesced (2)", ts[1],
          torch.arange(5.0) * (world * (world - 1) // 2))
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        t = torch.full((5,), float(rank + 1), dtype=dtype)
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(2.0))
        check(f"PREMUL_SUM 2.0 {dtype}", t, torch.full((5,), 2.0 * total, dtype=dtype))
    return 4


def misuse_worker(rank, world):
    """Bad use, at world ranks: each mismatch on a group of its own (a failed communicator stays
    unusable, as NCCL's), then a rank that dies. Every rank must raise a RuntimeError that names
    the call (mismatch) or the lost rank; none may return, and none may hang past the timeout."""
    import datetime
    import torch
    import torch.distributed as dist
    import braid_torch  # noqa: F401
    timeout = 10
    dist.init_process_group("braid", init_method=os.environ["BRAID_TEST_INIT"], rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=timeout))
    odd = rank == world - 1  # the rank that passes another shape, dtype, or dies
    cases = [("allreduce", "count", lambda g: dist.all_reduce(torch.ones(12 if odd else 10),
                                                              group=g)),
             ("allreduce", "dtype", lambda g: dist.all_reduce(
                 torch.ones(10, dtype=torch.int32 if odd else torch.float32), group=g)),
             ("broadcast", "count", lambda g: dist.broadcast(torch.ones(3 if odd else 5), src=0,
                                                             group=g)),
             ("_allgather_base", "count", lambda g: dist._all_gather_base(
                 torch.zeros(world * (4 if odd else 6)), torch.ones(4 if odd else 6), group=g))]
    for call, what, fn in cases:
        g = dist.new_group(backend="braid")
        start = time.monotonic()
        try:
            fn(g)
        except RuntimeError as e:
            if call not in str(e):
                raise AssertionError(f"{what} mismatch: the error does not name {call}: {e}")
            print(f"rank {rank}: {what} mismatch in {call} raised after "
                  f"{time.monotonic() - start:.1f} s: {str(e).splitlines()[0][:300]}", flush=True)
        else:
            raise AssertionError(f"{what} mismatch in {call}: rank {rank} returned")
    # The group's timeout bounds a wait on a rank that is alive but does not call: 1 s here,
    # while the odd rank stays away 3 s.
    g = dist.new_group(backend="braid", timeout=datetime.timedelta(seconds=1))
    if odd:
        time.sleep(3)
    else:
        start = time.monotonic()
        try:
            dist.all_reduce(torch.ones(4), group=g)
        except RuntimeError as e:
            took = time.monotonic() - start
            if f"rank {world - 1}" not in str(e) or not 0.9 < took < 2.5:
                raise AssertionError(f"timeout: after {took:.1f} s: {e}")
            print(f"rank {rank}: the 1 s timeout named rank {world - 1} after {took:.1f} s: "
                  f"{str(e).splitlines()[0][:300]}", flush=True)
        else:
            raise AssertionError("an all-reduce with a rank away past the timeout returned")
    # A subgroup of two ranks (new_group with ranks): its own communicator.
    sub = dist.new_group(ranks=[0, world - 1], backend="braid")
    if rank in (0, world - 1):
        t = torch.full((3,), float(rank + 1))
        dist.all_reduce(t, group=sub)
        check("all_reduce on the subgroup [0, last]", t, torch.full((3,), float(world + 1)))
    dist.barrier()
    if odd:
        os._exit(0)  # dies: no destroy, no goodbye
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(1000))
    except RuntimeError as e:
        took = time.monotonic() - start
        if f"rank {world - 1}" not in str(e) or took > timeout + 5:
            raise AssertionError(f"lost rank {world - 1}: after {took:.1f} s: {e}")
        print(f"rank {rank}: lost rank {world - 1} named after {took:.1f} s: "
              f"{str(e).splitlines()[0][:300]}", flush=True)
    else:
        raise AssertionError("an all-reduce with a dead rank returned")
    os._exit(0)  # the default group is unusable: no destroy_process_group


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(world, package_dir, init, tmp, mode="--worker"):
    port = free_port()
    init = {"env": "env://", "tcp": f"tcp://127.0.0.1:{port}",
            "file": f"file://{tmp}/store-{world}"}[init]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               WORLD_SIZE=str(world), PYTHONPATH=package_dir, BRAID_TEST_INIT=init)
    procs = [subprocess.Popen([sys.executable, __file__, mode, str(r), str(world)],
                              env=dict(env, RANK=str(r))) for r in range(world)]
    deadline = time.monotonic() + 240
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            codes.append("timeout")
    return codes


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        rank, world = int(sys.argv[2]), int(sys.argv[3])
        ran = worker(rank, world)
        if rank == 0:
            print(f"{world} rank(s): {ran} checks of rank 0 equal to Gloo's", flush=True)
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == "--misuse":
        misuse_worker(int(sys.argv[2]), int(sys.argv[3]))
        return 0
    package_dir, built = sys.argv[1], sys.argv[2]
    if built != "true":
        print("SKIP: built without torch (-Dtorch: /usr/bin/python3 has no torch, or it was "
              "disabled); scripts/setup.sh installs python3-torch")
        return 77
    sys.path.insert(0, package_dir)
    import braid_torch  # noqa: F401  fails here, not in every rank, if the package is broken
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for world, init in zip(RANK_COUNTS, INIT_METHODS):
            start = time.monotonic()
            codes = run(world, package_dir, init, tmp)
            print(f"{world} rank(s), {init}://: exit codes {codes}, "
                  f"{time.monotonic() - start:.1f} s", flush=True)
            failed |= any(c != 0 for c in codes)
        start = time.monotonic()
        codes = run(3, package_dir, "env", tmp, "--misuse")
        print(f"misuse at 3 ranks: exit codes {codes}, {time.monotonic() - start:.1f} s",
              flush=True)
        failed |= any(c != 0 for c in codes)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
