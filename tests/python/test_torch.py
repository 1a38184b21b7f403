"""ndstore.torch: distributed checkpoints (issue 19) with torch.distributed's gloo backend on CPU.

Ranks are real processes (torch.multiprocessing, spawn): a model-shaped state dict (embedding,
attention and MLP weights, biases, Adam state) saved by 4 ranks and loaded on 2 and 3 ranks with
other shardings, compared bit for bit with the tensors every rank regenerates from a seed; a rank
killed (SIGKILL) in the middle of a save leaves the previous checkpoint intact and the new one
invisible. The model of the save/load test has about 100 M values in all (parameters and Adam state;
NDS_TORCH_TEST_PARAMS changes it), the kill test's 10 M (it runs three saves that die).
"""
import math
import os
import signal
import socket
import sys
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

import ndstore  # noqa: E402
import ndstore.torch as nt  # noqa: E402

TARGET_VALUES = int(os.environ.get("NDS_TORCH_TEST_PARAMS", "100000000"))
KILL_TEST_VALUES = 10_000_000


# ---- the model: shapes and contents every rank derives alike ------------------------------------

def model_shapes(total=TARGET_VALUES):
    """name -> (shape, dtype) of a small transformer whose parameters and Adam state (exp_avg,
    exp_avg_sq: 3 values per parameter) come to about `total` values."""
    hidden = 256
    params = total // 3
    vocab = max(1000, (params // 3) // hidden)  # the embedding takes about a third
    layers = max(1, (params - vocab * hidden) // (12 * hidden * hidden))
    shapes = {"embed.weight": ((vocab, hidden), torch.float32)}
    for i in range(layers):
        p = "layers.%d." % i
        shapes[p + "attn.qkv.weight"] = ((3 * hidden, hidden), torch.float32)
        shapes[p + "attn.qkv.bias"] = ((3 * hidden,), torch.float32)
        shapes[p + "attn.out.weight"] = ((hidden, hidden), torch.bfloat16)
        shapes[p + "mlp.up.weight"] = ((4 * hidden, hidden), torch.float16)
        shapes[p + "mlp.down.weight"] = ((hidden, 4 * hidden), torch.float32)
        shapes[p + "norm.weight"] = ((hidden,), torch.float32)
    return shapes


def full_tensor(name, shape, dtype, salt=0):
    """The whole global tensor of name (the same on every rank and in the test process)."""
    g = torch.Generator().manual_seed((hash_name(name) + salt) % (2 ** 63))
    if dtype in (torch.float32, torch.float16, torch.bfloat16):
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-1000, 1000, shape, generator=g).to(dtype)


def hash_name(name):
    h = 1469598103934665603
    for b in name.encode():
        h = ((h ^ b) * 1099511628211) % (2 ** 64)
    return h


def row_box(shape, rank, world, uneven=True):
    """The rows of dimension 0 rank holds: split unevenly (so boundaries fall inside chunks)."""
    n = shape[0]
    cuts = [0]
    for r in range(1, world):
        cut = (n * r) // world + ((r * 7) % 5 if uneven else 0)
        cuts.append(min(max(cut, cuts[-1]), n))
    cuts.append(n)
    return cuts[rank], cuts[rank + 1] - cuts[rank]


def state_dict(rank, world, layout, salt=0, empty=False, values=TARGET_VALUES):
    """This rank's state dict: 2-D weights sharded (rows, or the last dimension for layout
    "cols"), 1-D values replicated, Adam state sharded like its parameter."""
    model, opt_state = {}, {}
    for i, (name, (shape, dtype)) in enumerate(sorted(model_shapes(values).items())):
        full = None if empty else full_tensor(name, shape, dtype, salt)
        if len(shape) == 1:
            model[name] = torch.zeros(shape, dtype=dtype) if empty else full
            continue
        dim = 1 if layout == "cols" else 0
        start, count = row_box(shape[dim:], rank, world)
        offsets = [0, 0]
        offsets[dim] = start
        local = torch.zeros([count if d == dim else n for d, n in enumerate(shape)], dtype=dtype) \
            if empty else full.narrow(dim, start, count).clone()
        model[name] = nt.Shard(local, offsets, shape)
        if dtype == torch.float32:
            st = {}
            for k in ("exp_avg", "exp_avg_sq"):
                fk = full_tensor(name + k, shape, dtype, salt) if not empty else None
                st[k] = nt.Shard(torch.zeros_like(local) if empty else fk.narrow(dim, start, count).clone(),
                                 offsets, shape)
            opt_state[i] = st
    return {"model": model, "optim": {"state": opt_state, "param_groups": [{"lr": 0.001, "betas": (0.9, 0.95)}]},
            "step": 100 + salt, "config": {"name": "tiny", "layers": 2}}


def check_state(sd, salt, values=TARGET_VALUES):
    """Every tensor of a loaded state dict equals the global tensor's box, bit for bit."""
    shapes = model_shapes(values)
    for name, v in sd["model"].items():
        shape, dtype = shapes[name]
        full = full_tensor(name, shape, dtype, salt)
        got, box = (v.tensor, v.offsets) if isinstance(v, nt.Shard) else (v, (0,) * v.dim())
        want = full[tuple(slice(o, o + n) for o, n in zip(box, got.shape))]
        assert torch.equal(got.view(torch.int16) if dtype == torch.bfloat16 else got,
                           want.view(torch.int16) if dtype == torch.bfloat16 else want), name
    for i, st in sd["optim"]["state"].items():
        name = sorted(shapes)[i]
        for k, v in st.items():
            full = full_tensor(name + k, shapes[name][0], shapes[name][1], salt)
            want = full[tuple(slice(o, o + n) for o, n in zip(v.offsets, v.tensor.shape))]
            assert torch.equal(v.tensor, want), (name, k)


# ---- running ranks -------------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank, world, port, job, args, results):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    import datetime
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    try:
        results[rank] = job(rank, world, *args)
    except BaseException as e:  # reported to the test
        results[rank] = ("error", "%s: %s" % (type(e).__name__, e))
    finally:
        dist.destroy_process_group()


def run_ranks(world, job, *args, timeout=600):
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        results = manager.dict()
        port = free_port()
        procs = [ctx.Process(target=_rank_main, args=(r, world, port, job, args, results))
                 for r in range(world)]
        for p in procs:
            p.start()
        deadline = time.time() + timeout
        for p in procs:
            p.join(max(1, deadline - time.time()))
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
        out = dict(results)
        codes = [p.exitcode for p in procs]
    return out, codes


def job_save(rank, world, url, layout, salt, async_, values=TARGET_VALUES):
    sd = state_dict(rank, world, layout, salt, values=values)
    if async_:
        fut = nt.save(sd, url, async_=True, staging_budget=8 << 20)
        # Training goes on: the staged copies, not these tensors, are written.
        for v in sd["model"].values():
            (v.tensor if isinstance(v, nt.Shard) else v).zero_()
        return fut.result(timeout=300)
    return nt.save(sd, url)


def job_load(rank, world, url, layout, salt, version, values=TARGET_VALUES):
    like = state_dict(rank, world, layout, empty=True, values=values)
    out = nt.load(url, like, version=version)
    check_state(like, salt, values)
    assert out["step"] == 100 + salt and out["config"] == {"name": "tiny", "layers": 2}
    assert out["optim"]["param_groups"][0]["betas"] == (0.9, 0.95)
    return "ok"


def job_save_killed(rank, world, url, salt, victim, after_writes):
    """Saves; rank `victim` SIGKILLs itself after `after_writes` array writes of its part."""
    if rank == victim:
        real = nt._PartWriter.write
        count = [0]

        def write(self, *a):
            count[0] += 1
            if count[0] > after_writes:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(self, *a)
        nt._PartWriter.write = write
    return nt.save(state_dict(rank, world, "rows", salt, values=KILL_TEST_VALUES), url)


# ---- tests ---------------------------------------------------------------------------------------

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.uint8, torch.bool,
          torch.float64, torch.int16, torch.int8]


def test_one_process_every_dtype_and_value(tmp_path):
    url = "file://%s/ck/" % tmp_path
    g = torch.Generator().manual_seed(1)
    sd = {"t": {str(dt): (torch.randn(37, 5, generator=g) * 100).to(dt) for dt in DTYPES},
          "scalar": torch.tensor(2.5), "empty": torch.zeros(0, 4), "step": 7, "name": "x/y:z|w",
          "nested": {3: {"k": [1, 2.5, None, True, "s", (1, 2)]}}, "odd key/with|chars~": torch.ones(3),
          "unset": None}
    v = nt.save(sd, url)
    assert v == 1 and nt.latest(url) == 1
    like = {"t": {k: torch.zeros_like(t) for k, t in sd["t"].items()}, "scalar": torch.tensor(0.0),
            "empty": torch.zeros(0, 4), "step": 0, "nested": {}, "odd key/with|chars~": torch.zeros(3),
            "unset": 5, "only_mine": "kept"}
    out = nt.load(url, like)
    for k, t in sd["t"].items():
        assert torch.equal(like["t"][k], t), k
    assert like["scalar"].item() == 2.5 and torch.equal(like["odd key/with|chars~"], torch.ones(3))
    assert out["step"] == 7 and out["name"] == "x/y:z|w"
    assert out["nested"] == {3: {"k": [1, 2.5, None, True, "s", (1, 2)]}}
    assert out["unset"] is None and out["only_mine"] == "kept"  # the checkpoint's None wins


def test_versions_list_and_older_checkpoint(tmp_path):
    url = "file://%s/ck/" % tmp_path
    for step in range(3):
        nt.save({"w": torch.full((10,), float(step)), "step": step}, url, message="step %d" % step)
    found = nt.list(url)
    assert [c["version"] for c in found] == [3, 2, 1]
    assert found[0]["message"] == "step 2"
    like = {"w": torch.zeros(10)}
    assert nt.load(url, like, version=2)["step"] == 1 and like["w"][0].item() == 1.0
    ndstore.tag(url, "best", 2)
    assert nt.load(url, like, version="best")["step"] == 1
    assert [c["tags"] for c in nt.list(url)] == [[], ["best"], []]
    assert nt.load(url, like)["step"] == 2 and like["w"][0].item() == 2.0
    assert nt.load(url + "|versioned:", like)["step"] == 2


def test_errors_name_the_entry(tmp_path):
    url = "file://%s/ck/" % tmp_path
    with pytest.raises(TypeError, match=r"state_dict\['bad'\].*set"):
        nt.save({"bad": {1, 2}}, url)
    with pytest.raises(ndstore.NotFound, match="no checkpoint"):
        nt.load(url, {"w": torch.zeros(2)})
    nt.save({"w": torch.zeros(4, 2)}, url)
    with pytest.raises(ValueError, match=r"like\['w'\] has shape \[3, 2\]"):
        nt.load(url, {"w": torch.zeros(3, 2)})
    with pytest.raises(TypeError, match="holds float32, the target is torch.float16"):
        nt.load(url, {"w": torch.zeros(4, 2, dtype=torch.float16)})
    with pytest.raises(ndstore.NotFound, match=r"like\['v'\] is not in the checkpoint"):
        nt.load(url, {"v": torch.zeros(4, 2)})
    with pytest.raises(ValueError, match="outside"):
        nt.Shard(torch.zeros(3), [2], [4])
    with pytest.raises(ndstore.Mismatch, match="no checkpoint made.*shape"):
        nt.save({"w": torch.zeros(5, 2)}, url)  # a reshaped tensor: documented as refused
    assert nt.latest(url) == 1


def test_async_save_copies_before_returning(tmp_path):
    url = "file://%s/ck/" % tmp_path
    w = torch.arange(1 << 20, dtype=torch.float32).reshape(1024, 1024)
    keep = w.clone()
    fut = nt.save({"w": w, "b": torch.ones(5)}, url, async_=True, staging_budget=1 << 20)
    w.zero_()  # the training loop moves on
    assert fut.result(timeout=120) == 1
    like = {"w": torch.zeros(1024, 1024), "b": torch.zeros(5)}
    nt.load(url, like)
    assert torch.equal(like["w"], keep)


def test_four_ranks_save_two_and_three_ranks_load(tmp_path):
    url = "file://%s/ck/" % tmp_path
    out, codes = run_ranks(4, job_save, url, "rows", 0, False)
    assert codes == [0] * 4, (codes, out)
    assert sorted(out.values()) == [1] * 4, out
    out, codes = run_ranks(4, job_save, url, "rows", 1, True)  # async, a second checkpoint
    assert sorted(out.values()) == [2] * 4, out
    for world, layout, version, salt in ((2, "cols", 1, 0), (3, "rows", None, 1)):
        out, codes = run_ranks(world, job_load, url, layout, salt, version)
        assert list(out.values()) == ["ok"] * world, out


def test_rank_killed_mid_save_leaves_previous_checkpoint(tmp_path):
    url = "file://%s/ck/" % tmp_path
    out, codes = run_ranks(3, job_save, url, "rows", 0, False, KILL_TEST_VALUES)
    assert codes == [0] * 3 and len(set(out.values())) == 1, (codes, out)
    first = nt.list(url)
    rng = np.random.default_rng(int(os.environ.get("NDS_TEST_SEED", "19")))
    for attempt in range(3):
        victim, after = int(rng.integers(0, 3)), int(rng.integers(0, 12))
        out, codes = run_ranks(3, job_save_killed, url, 5 + attempt, victim, after, timeout=120)
        assert codes[victim] == -signal.SIGKILL, (codes, out)
        assert all(isinstance(v, tuple) and v[0] == "error" for v in out.values()), out
        assert nt.list(url) == first  # the partial checkpoint is invisible
        out, codes = run_ranks(2, job_load, url, "cols", 0, None, KILL_TEST_VALUES)
        assert list(out.values()) == ["ok"] * 2, out


def test_chunks_follow_the_ranks_boxes():
    mib = 1 << 20
    # Rows split evenly by 4 ranks: no chunk spans two ranks' rows.
    assert nt._chunks_for([3072, 1024], 4, {0: {768, 1536, 2304}}) == [768, 1024]
    # Columns split: chunks a quarter wide, as many rows as the 8 MiB target allows.
    assert nt._chunks_for([1024, 4096], 4, {1: {1024, 2048, 3072}}) == [1024, 1024]
    # Uneven splits (no common divisor worth having) keep size-based chunks: merged at commit.
    assert nt._chunks_for([3072, 1024], 4, {0: {767, 1537}}) == [2048, 1024]
    assert nt._chunks_for([3072, 1024], 4) == [2048, 1024]
    for shape, cuts in (([10, 7], {0: {5}}), ([0, 4], {}), ([1], {}), ([5, 3, 2], {2: {1}})):
        chunks = nt._chunks_for(shape, 2, cuts)
        assert len(chunks) == len(shape) and all(c >= 1 for c in chunks)
        assert math.prod(chunks) * 2 <= 8 * mib


def test_another_world_size_saves_into_the_same_store(tmp_path):
    url = "file://%s/ck/" % tmp_path
    out, codes = run_ranks(2, job_save, url, "rows", 0, False, KILL_TEST_VALUES)
    assert codes == [0, 0], out
    out, codes = run_ranks(3, job_save, url, "cols", 1, False, KILL_TEST_VALUES)
    assert codes == [0, 0, 0], out
    out, codes = run_ranks(2, job_load, url, "rows", 1, None, KILL_TEST_VALUES)
    assert list(out.values()) == ["ok"] * 2, out


def test_s3_four_ranks_save_three_ranks_load():
    """On an S3 server (tests/integration/s3_test.sh runs it against Ceph RGW with the endpoint and
    credentials in the environment): 4 ranks save, 3 ranks load another sharding."""
    url = os.environ.get("NDS_TORCH_TEST_S3_URL")
    if not url:
        pytest.skip("NDS_TORCH_TEST_S3_URL not set (tests/integration/s3_test.sh sets it)")
    values = int(os.environ.get("NDS_TORCH_TEST_S3_PARAMS", str(TARGET_VALUES)))
    out, codes = run_ranks(4, job_save, url, "rows", 0, False, values)
    assert codes == [0] * 4 and len(set(out.values())) == 1, (codes, out)
    out, codes = run_ranks(3, job_load, url, "cols", 0, None, values)
    assert list(out.values()) == ["ok"] * 3, out
