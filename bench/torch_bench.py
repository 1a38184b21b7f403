#!/usr/bin/python3
"""ndstore.torch against torch.save/torch.load (issue 19): one markdown table from one run.

A torch job of --ranks processes (torch.multiprocessing, gloo on CPU) holds a model-shaped state
dict of about --values values (a transformer's embedding, attention and MLP weights in float32,
bfloat16 and float16, biases, and Adam's two moments per float32 weight), each 2-D tensor split by
rows across the ranks. Every rank, between barriers:

- ndstore:      ndstore.torch.save(sd, "file://D/nds/") (one atomic version; every file fsynced),
                then ndstore.torch.load into a zeroed copy, compared bit for bit;
- async:        ndstore.torch.save(..., async_=True): how long the call blocks the training loop,
                and how long until the version is committed;
- torch.save:   torch.save of the rank's own state dict to a new file "D/torch/step<i>/rank<r>.pt"
                per round, with an fsync of the file and its directory (what a checkpoint needs to
                survive a crash; torch.save does neither) and without, then torch.load of it.

Rounds (--rounds, default 3) alternate the tools; each round's checkpoint goes to a new place for
both (a new version; a new file): overwriting the previous file would lose it to a crash mid-save,
and measures the page cache's reuse of the file's pages instead of a checkpoint's write.
Times are the slowest rank's (what the job waits for), from a barrier to a barrier, as the
training loop sees them; peak RSS is each rank's ru_maxrss after the save, against its RSS before
and the staging budget. torch 1.13's distributed checkpoint module (torch.distributed._shard.
checkpoint) is tried and reported: on Debian 12 it fails to import under Python 3.11.

usage: bench/torch_bench.py BUILD_DIR [--ranks 4] [--values 100000000] [--rounds 3] [--tmp DIR] [--quick]
"""
import argparse
import os
import resource
import shutil
import socket
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def model(values, rank, world):
    """This rank's state dict: 2-D weights and their Adam moments split by rows (as Shards for
    ndstore, plain local tensors for torch.save), 1-D tensors replicated."""
    import ndstore.torch as nt
    hidden = 1024 if values >= 50_000_000 else 256
    params = values // 3 * 2  # float32 weights carry two moments; bf16/fp16 ones none
    vocab = max(1024, params // 4 // hidden)
    layers = max(1, (params - vocab * hidden) // (12 * hidden * hidden))
    shapes = {"embed.weight": ((vocab, hidden), torch.float32)}
    for i in range(layers):
        p = "layers.%d." % i
        shapes[p + "attn.qkv.weight"] = ((3 * hidden, hidden), torch.float32)
        shapes[p + "attn.qkv.bias"] = ((3 * hidden,), torch.float32)
        shapes[p + "attn.out.weight"] = ((hidden, hidden), torch.bfloat16)
        shapes[p + "mlp.up.weight"] = ((4 * hidden, hidden), torch.float16)
        shapes[p + "mlp.down.weight"] = ((hidden, 4 * hidden), torch.float32)
    g = torch.Generator().manual_seed(rank)
    nds_sd, plain_sd, total = {}, {}, 0
    for name, (shape, dtype) in shapes.items():
        kinds = [name] + ([name + ".exp_avg", name + ".exp_avg_sq"] if dtype == torch.float32 else [])
        for key in kinds:
            if len(shape) == 1:  # replicated: the same on every rank
                t = torch.randn(shape, generator=torch.Generator().manual_seed(len(key))).to(dtype)
                nds_sd[key], plain_sd[key] = t, t
                total += t.numel()
                continue
            total += shape[0] * shape[1]
            start = shape[0] * rank // world
            rows = shape[0] * (rank + 1) // world - start
            t = torch.randn((rows,) + shape[1:], generator=g).to(dtype)
            nds_sd[key] = nt.Shard(t, (start, 0), shape)
            plain_sd[key] = t
    return nds_sd, plain_sd, total


def zeroed(sd):
    import ndstore.torch as nt
    out = {}
    for k, v in sd.items():
        if isinstance(v, nt.Shard):
            out[k] = nt.Shard(torch.zeros_like(v.tensor), v.offsets, v.global_shape)
        else:
            out[k] = torch.zeros_like(v)
    return out


def same(a, b):
    import ndstore.torch as nt
    for k, v in a.items():
        x = v.tensor if isinstance(v, nt.Shard) else v
        y = b[k].tensor if isinstance(b[k], nt.Shard) else b[k]
        if not torch.equal(x.view(torch.int16) if x.dtype == torch.bfloat16 else x,
                           y.view(torch.int16) if y.dtype == torch.bfloat16 else y):
            return False
    return True


def rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def timed(fn):
    dist.barrier()
    t0 = time.perf_counter()
    out = fn()
    dist.barrier()
    return time.perf_counter() - t0, out


def torch_save_fsync(sd, path):
    """torch.save made durable as a checkpoint must be: the file and its directory entry fsynced."""
    with open(path, "wb") as f:
        torch.save(sd, f)
        f.flush()
        os.fsync(f.fileno())
    fd = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def rank_main(rank, world, port, pydir, args, results):
    """Rounds alternate the tools, and every checkpoint goes to a new place (ndstore: a new
    version; torch.save: a new file per step, as a job keeping its last checkpoints does: writing
    over the previous file would lose it to a crash mid-save). Medians per measurement."""
    sys.path.insert(0, pydir)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    import ndstore.torch as nt
    nds_sd, plain_sd, total = model(args.values, rank, world)
    nbytes = sum((v.tensor if isinstance(v, nt.Shard) else v).numel() *
                 (v.tensor if isinstance(v, nt.Shard) else v).element_size() for v in nds_sd.values())
    r = {"bytes": nbytes, "values": total}
    base = os.path.join(args.tmp, "nds")
    rss_before = current_rss_mib()
    times = {k: [] for k in ("save", "tsave", "tsave_fsync", "load", "tload", "async_block",
                             "async_total")}
    path = None
    for step in range(args.rounds):
        times["save"].append(timed(lambda: nt.save(nds_sd, "file://%s/" % base))[0])
        r["rss_save"] = rss_mib()
        tdir = os.path.join(args.tmp, "torch", "step%d" % step)
        os.makedirs(tdir, exist_ok=True)
        path = os.path.join(tdir, "rank%d.pt" % rank)
        times["tsave_fsync"].append(timed(lambda: torch_save_fsync(plain_sd, path))[0])
        times["tsave"].append(timed(lambda: torch.save(plain_sd, path + ".nofsync"))[0])
        dist.barrier()
        t0 = time.perf_counter()
        fut = nt.save(nds_sd, "file://%s/" % base, async_=True)
        times["async_block"].append(time.perf_counter() - t0)
        fut.result()
        times["async_total"].append(time.perf_counter() - t0)
    like = zeroed(nds_sd)
    for _ in range(args.rounds):
        times["load"].append(timed(lambda: nt.load("file://%s/" % base, like))[0])
        seconds, loaded = timed(lambda: torch.load(path))
        times["tload"].append(seconds)
    r["load_ok"] = same(like, nds_sd)
    r["tload_ok"] = all(torch.equal(loaded[k], v) for k, v in plain_sd.items())
    r.update({k: statistics.median(v) for k, v in times.items()})
    r["all"] = times
    r["rss_before"] = rss_before
    results[rank] = r
    dist.destroy_process_group()


def dcp_status():
    try:
        import torch.distributed._shard.checkpoint  # noqa: F401
        return "importable (not measured by this script)"
    except Exception as e:  # reported in the table
        return "fails to import (%s: %s)" % (type(e).__name__, str(e).splitlines()[0][:90])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--values", type=int, default=100_000_000)
    ap.add_argument("--tmp", default=None)
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (medians reported)")
    ap.add_argument("--quick", action="store_true", help="2 ranks, 4 M values: a smoke run")
    args = ap.parse_args()
    if args.quick:
        args.ranks, args.values, args.rounds = 2, 4_000_000, 1
    pydir = os.path.join(os.path.abspath(args.build), "python")
    tmp = tempfile.mkdtemp(prefix="nds-torch-bench-", dir=args.tmp)
    args.tmp = tmp
    try:
        ctx = mp.get_context("spawn")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with ctx.Manager() as manager:
            results = manager.dict()
            t0 = time.perf_counter()
            procs = [ctx.Process(target=rank_main, args=(r, args.ranks, port, pydir, args, results))
                     for r in range(args.ranks)]
            for p in procs:
                p.start()
            for p in procs:
                p.join()
            wall = time.perf_counter() - t0
            res = [results[r] for r in range(args.ranks)]
        if any(p.exitcode for p in procs):
            sys.exit("torch_bench: a rank failed: exit codes %s" % [p.exitcode for p in procs])
        report(args, res, wall)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report(args, res, wall):
    for k in ("save", "tsave_fsync", "load", "tload"):
        slowest = [max(r["all"][k][i] for r in res) for i in range(args.rounds)]
        print("# %s per round (slowest rank): %s" % (k, " ".join("%.2f" % x for x in slowest)))
    total_bytes = sum(r["bytes"] for r in res)
    mb = total_bytes / 1e6
    worst = {k: max(r[k] for r in res) for k in res[0] if isinstance(res[0][k], float)}
    print("ndstore.torch vs torch.save (issue 19): %d ranks, %.0f M values, %.0f MB in all "
          "(whole job %.1f s); medians of %d alternating rounds, every checkpoint to a new place"
          % (args.ranks, res[0]["values"] / 1e6, mb, wall, args.rounds))
    print("| measurement (slowest rank, barrier to barrier) | ndstore.torch | torch.save / torch.load | |")
    print("|---|---|---|---|")
    print("| save (ndstore: one atomic version, fsynced; torch.save: a new file per rank) | %.2f s "
          "(%.0f MB/s) | %.2f s (%.0f MB/s) with fsync of file and directory; %.2f s without | "
          "%.2fx torch.save+fsync |" %
          (worst["save"], mb / worst["save"], worst["tsave_fsync"], mb / worst["tsave_fsync"],
           worst["tsave"], worst["tsave_fsync"] / worst["save"]))
    print("| load (into the tensors in place / a new dict) | %.2f s (%.0f MB/s)%s | %.2f s (%.0f MB/s)%s | "
          "%.2fx |" % (worst["load"], mb / worst["load"], "" if all(r["load_ok"] for r in res) else " WRONG",
                       worst["tload"], mb / worst["tload"], "" if all(r["tload_ok"] for r in res) else " WRONG",
                       worst["tload"] / worst["load"]))
    print("| async save: training loop blocked / until committed | %.2f s / %.2f s | - | - |" %
          (worst["async_block"], worst["async_total"]))
    print("| peak RSS of a saving rank: before save / peak (staging budget 1024 MiB) | %.0f / %.0f MiB | - | "
          "%s |" % (max(r["rss_before"] for r in res), max(r["rss_save"] for r in res),
                    "within" if max(r["rss_save"] - r["rss_before"] for r in res) <= 1024 + 64 else "OVER"))
    print("| torch 1.13 distributed checkpoint (torch.distributed._shard.checkpoint) | - | %s | - |" %
          dcp_status())


if __name__ == "__main__":
    main()
