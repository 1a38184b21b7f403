"""Threads and futures: the GIL is released during C calls, concurrent writers lose nothing, futures
carry results and ndstore errors, close() while a call runs is safe."""
import functools
import http.server
import threading
import time

import numpy as np
import pytest

import ndstore


def test_gil_released_python_server_answers_the_read(tmp_path):
    """The array is served over HTTP by a Python thread of this process: a read that kept the GIL would
    starve the server and fail (the http driver gives up after its retries); it succeeds."""
    src = ndstore.open("file://%s/srv/a.zarr|zarr:" % tmp_path, create=True, shape=(64, 64), chunks=(16, 16),
                       dtype="uint16", codec="zstd:1")
    ref = np.arange(64 * 64, dtype=np.uint16).reshape(64, 64)
    src[...] = ref
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "srv"))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        # a bounded deadline, so that a read keeping the GIL fails in seconds rather than a minute
        a = ndstore.open({"driver": "zarr", "kvstore": {
            "driver": "http", "base_url": "http://127.0.0.1:%d" % server.server_address[1], "path": "a.zarr/",
            "http_request_deadline": "10s"}})
        np.testing.assert_array_equal(a[...], ref)
        np.testing.assert_array_equal(a.read_async(np.s_[::3, 5]).result(timeout=30), ref[::3, 5])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_python_thread_progresses_during_a_read(tmp_path):
    a = ndstore.open("file://%s/big|zarr:" % tmp_path, create=True, shape=(1024, 1024, 8), chunks=(256, 256, 8),
                     dtype="float64", codec="zstd:1")
    a[...] = np.random.default_rng(0).standard_normal((1024, 1024, 8))
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    t = threading.Thread(target=ticker)
    t.start()
    time.sleep(0.02)
    start = time.perf_counter()
    for _ in range(3):
        a[...]
    end = time.perf_counter()
    stop.set()
    t.join()
    during = [x for x in ticks if start < x < end]
    # With the GIL held for the whole read, the ticker could not run during it (at most a tick or two
    # around the Python-level work).
    assert len(during) > 0.3 * (end - start) / 0.002, (len(during), end - start)


def test_eight_threads_disjoint_and_overlapping(tmp_path):
    a = ndstore.open("file://%s/t|zarr:" % tmp_path, create=True, shape=(64, 64), chunks=(16, 16), dtype="int32",
                     fill_value=-1)
    barrier = threading.Barrier(8)
    errors = []

    def disjoint(r):
        try:
            barrier.wait()
            for i in range(8):  # rows r, r+8, ...: every chunk is shared by several threads
                a[r + 8 * i, :] = r
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=disjoint, args=(r,)) for r in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert not errors
    expect = np.repeat(np.tile(np.arange(8), 8), 64).reshape(64, 64)
    np.testing.assert_array_equal(a[...], expect)

    # interleaved steps: thread k writes columns k::8 of the same rows as every other thread
    def strided(k):
        barrier.wait()
        for _ in range(4):
            a[:, k::8] = 100 + k

    threads = [threading.Thread(target=strided, args=(k,)) for k in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    np.testing.assert_array_equal(a[...], np.tile(100 + np.arange(8), (64, 8)))

    # overlapping boxes: the result is one of the writers' values in each element, never fill or torn
    def overlapping(k):
        barrier.wait()
        a[k:k + 40, k:k + 40] = 200 + k

    threads = [threading.Thread(target=overlapping, args=(k,)) for k in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    got = a[...]
    inner = got[7:40, 7:40]
    assert set(np.unique(inner)) <= set(200 + np.arange(8))
    assert (got[47:, 47:] == 100 + np.arange(47, 64) % 8).all()


def test_futures(tmp_path):
    a = ndstore.open("file://%s/f|zarr:" % tmp_path, create=True, shape=(32, 32), chunks=(8, 8), dtype="float32")
    value = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
    futures = [a.write_async(np.s_[i * 8:(i + 1) * 8], value[i * 8:(i + 1) * 8]) for i in range(4)]
    value_copy = value.copy()
    value[...] = 0  # the request took a copy
    assert [f.result(timeout=30) for f in futures] == [None] * 4
    reads = [a.read_async(np.s_[i, ::2]) for i in range(32)]
    for i, f in enumerate(reads):
        np.testing.assert_array_equal(f.result(timeout=30), value_copy[i, ::2])
    bad = ndstore.open("file://%s/f|zarr:" % tmp_path).read_async(np.s_[40])
    with pytest.raises(IndexError):
        bad.result(timeout=30)
    missing = ndstore.executor.submit(ndstore.open, "file://%s/none|zarr:" % tmp_path)
    with pytest.raises(ndstore.NotFound):
        missing.result(timeout=30)
    assert ndstore.executor._max_workers >= 1


def test_close_while_reading(tmp_path):
    a = ndstore.open("file://%s/c|zarr:" % tmp_path, create=True, shape=(512, 512, 4), chunks=(128, 128, 4),
                     dtype="float64", codec="zstd:1")
    a[...] = 1.0
    futures = [a.read_async() for _ in range(4)]
    time.sleep(0.005)
    a.close()  # the calls in flight finish; the array is freed by the last one
    for f in futures:
        try:
            assert f.result(timeout=60).shape == (512, 512, 4)
        except ValueError as e:  # started after close
            assert "closed" in str(e)
    with pytest.raises(ValueError, match="closed"):
        a[0]
