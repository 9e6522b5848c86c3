"""dod.cuda on a real GPU (skipped, with the reason, where CuPy or a device is missing).

Run by tests/gpu/run_gpu_checks.sh:  python -m pytest tests/gpu -q --confcutdir=tests/gpu

With DOD_FAKE_CUPY=1 they run against the host-memory stand-in
(tests/gpu/fake_cupy.py); the tests only a GPU can make meaningful skip there
with a reason starting "needs a real GPU" (STAND_IN, needs_real_gpu below).
"""
import gc
import warnings

import numpy as np
import pytest

cp = pytest.importorskip("cupy", reason="dod.cuda GPU tests need CuPy (pip install cupy-cuda12x)")


def _device_count():
    try:
        return cp.cuda.runtime.getDeviceCount()
    except Exception:               # no driver / no device
        return 0


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(_device_count() == 0, reason="no CUDA device is usable here"),
]

# Under the host-memory stand-in (DOD_FAKE_CUPY=1, tests/gpu/fake_cupy.py) a
# test that only a GPU can make meaningful skips, its reason starting with
# this phrase (CI accepts exactly these skips besides "no GPU" ones).
STAND_IN = getattr(cp, "IS_DOD_STAND_IN", False)
GPU_ONLY = "needs a real GPU"


def needs_real_gpu(why):
    """Skip under the stand-in: `why` says what only a GPU can show."""
    return pytest.mark.skipif(STAND_IN, reason=f"{GPU_ONLY}: {why}")

import dod  # noqa: E402
from dod.cuda import DeviceArena, EscapeWarning, PinnedArena  # noqa: E402
from dod.cuda import kernels  # noqa: E402
from dod.cuda.kernels import HEADER_BYTES, get_function, launch  # noqa: E402

TAG = np.dtype([("i", np.uint32), ("not_i", np.uint32), ("n", np.uint32), ("zero", np.uint32)])


def _inside(arena, ptr, nbytes=0):
    """True when [ptr, ptr + nbytes) lies in the arena's carve region."""
    lo = arena.ptr + HEADER_BYTES + arena.push_capacity
    return lo <= ptr and ptr + nbytes <= lo + arena.capacity


@pytest.fixture
def stream():
    # A blocking stream: ordered after work on the legacy default stream
    # (cp.zeros of a test's counters), as a test wants.
    s = cp.cuda.Stream()
    yield s
    s.synchronize()


# ---------------------------------------------------------------- carving

def test_carve_layout_values_and_stats(stream):
    a = DeviceArena(1 << 20, push_capacity=1000, stream=stream)
    assert a.push_capacity == 1024 and a.capacity == 1 << 20 and a.used == 0
    assert a.nbytes == HEADER_BYTES + 1024 + (1 << 20)
    x = a.empty(1000, np.float32)
    y = a.zeros((10, 3), np.int64)
    z = a.upload(np.arange(7, dtype=np.float64))
    assert isinstance(x, cp.ndarray) and x.dtype == np.float32 and x.shape == (1000,)
    for arr in (x, y, z):
        assert arr.data.ptr % 256 == 0
        assert _inside(a, arr.data.ptr, arr.nbytes)
    assert x.data.ptr + x.nbytes <= y.data.ptr and y.data.ptr + y.nbytes <= z.data.ptr   # bump order, no overlap
    stream.synchronize()
    assert (y.get() == 0).all()
    assert np.array_equal(z.get(), np.arange(7, dtype=np.float64))
    with stream:
        x[...] = cp.arange(1000, dtype=cp.float32)
    stream.synchronize()
    assert float(x[999].get()) == 999.0
    assert a.allocations == 3 and a.failed == 0 and a.used >= 4000 + 240 + 56
    assert a.stats()["push_capacity"] == 1024
    assert "DeviceArena" in repr(a)


def test_zeros_and_upload_overwrite_dirty_memory(stream):
    # Device memory promises nothing (the stand-in fills it with garbage; a
    # GPU may hand back a previous frame's bytes): dirty it, rewind, and the
    # zeros/upload carved over the same bytes must still read exactly.
    a = DeviceArena(1 << 16, stream=stream)
    m = a.mark()
    dirty = a.upload(np.full(4096, 0xFF, dtype=np.uint8))
    first = dirty.data.ptr
    del dirty
    a.rewind(m)
    z = a.zeros(1024, np.int32)
    assert z.data.ptr == first
    u = a.upload(np.arange(256, dtype=np.uint16))
    e = a.empty(8, np.float64)
    stream.synchronize()
    assert (z.get() == 0).all()
    assert np.array_equal(u.get(), np.arange(256, dtype=np.uint16))
    assert e.shape == (8,)                 # empty() promises no contents


def test_host_and_device_arrays_are_not_interchangeable(stream):
    a = DeviceArena(4096, push_capacity=256, stream=stream)
    d = a.empty(64, np.uint8)
    with pytest.raises(TypeError, match="numpy array"):
        a.upload(d)                        # a device array where host data is due
    with pytest.raises(TypeError, match="numpy array"):
        a.download_pushes(a.empty(512, np.uint8))
    with pytest.raises(TypeError):
        np.asarray(d)                      # CuPy refuses implicit device-to-host conversion
    assert a.allocations == 2              # the refused calls carved nothing


def test_alignment_and_dtype_alignment(stream):
    a = DeviceArena(4096, stream=stream)
    p = a.empty(3, np.uint8, align=16)
    q = a.empty(1, np.uint8, align=16)
    assert q.data.ptr - p.data.ptr == 16
    with pytest.raises(ValueError, match="above the 256"):
        a.empty(1, np.uint8, align=512)
    with pytest.raises(TypeError, match="Python objects"):
        a.empty(1, object)


def test_exhaustion_leaves_state_unchanged(stream):
    a = DeviceArena(1024, stream=stream)
    x = a.empty(100, np.float32)
    used, allocs = a.used, a.allocations
    with pytest.raises(MemoryError, match="exhausted"):
        a.empty(1000, np.float32)
    assert (a.used, a.allocations, a.failed) == (used, allocs, 1)
    del x


def test_arrays_keep_the_arena_alive_and_block_checked_reset(stream):
    a = DeviceArena(1 << 16, stream=stream)
    x = a.upload(np.arange(100, dtype=np.int32))
    with pytest.raises(BufferError, match="still alive"):
        a.reset()
    m = a.mark()
    y = a.empty(10, np.int32)
    with pytest.raises(BufferError):
        a.rewind(m)
    del y
    a.rewind(m)
    assert a.used == m.position
    del a
    gc.collect()
    stream.synchronize()
    # The one device allocation outlives the arena object while x lives.
    assert np.array_equal(x.get(), np.arange(100, dtype=np.int32))
    x += 1
    assert int(x.sum()) == sum(range(1, 101))


def test_rewind_rejects_foreign_or_stale_marks(stream):
    a = DeviceArena(4096, stream=stream)
    b = DeviceArena(4096, stream=stream)
    with pytest.raises(ValueError, match="another arena"):
        a.rewind(b.mark())
    x = a.empty(100, np.uint8)
    m = a.mark()
    del x
    a.reset()
    with pytest.raises(ValueError, match="beyond"):
        a.rewind(m)
    with pytest.raises(TypeError):
        a.rewind(0)


def test_reset_unchecked_reuses_memory(stream):
    a = DeviceArena(4096, stream=stream)
    x = a.empty(16, np.float32)
    a.reset(unchecked=True)
    y = a.empty(16, np.float32)
    assert x.data.ptr == y.data.ptr          # aliasing: the caller owns it; memory stays valid
    assert a.peak >= 64


# ---------------------------------------------------------------- kernel pushes

def _push_tagged(a, n, stream):
    failed = cp.zeros(1, dtype=cp.uint64)
    k = get_function("alloc_arena", "dod_push_tagged")
    launch(k, n, (np.int32(n), a.header, failed), stream=stream)
    stream.synchronize()
    return int(failed.get()[0])


def test_header_starts_empty(stream):
    a = DeviceArena(0, push_capacity=4096, stream=stream)
    assert a.pushed() == 0 and not a.overflowed()
    assert a.pushes(TAG).shape == (0,)
    assert int(a.header) == a.ptr


def test_kernel_pushes_one_atomic_each(stream):
    n = 1000
    a = DeviceArena(0, push_capacity=16 * n, stream=stream)
    assert _push_tagged(a, n, stream) == 0
    assert a.pushed() == 16 * n and not a.overflowed()
    recs = a.pushes(TAG)
    assert isinstance(recs, np.ndarray) and recs.shape == (n,)
    assert sorted(recs["i"].tolist()) == list(range(n))             # every thread pushed once
    assert np.array_equal(recs["not_i"], ~recs["i"])
    assert (recs["n"] == 16).all() and (recs["zero"] == 0).all()


@needs_real_gpu("the stand-in runs device threads one at a time, so atomicAdd is never contended")
def test_contended_pushes_from_a_million_threads(stream):
    n = 1 << 20                            # 4096 blocks: every SM contends for one `used` word
    a = DeviceArena(0, push_capacity=16 * n, stream=stream)
    for _ in range(3):                     # and again after each 8-byte reset
        a.reset_pushes()
        assert _push_tagged(a, n, stream) == 0
        assert a.pushed() == 16 * n
        recs = a.pushes(TAG)
        assert np.array_equal(np.sort(recs["i"]), np.arange(n, dtype=np.uint32))   # no slot given twice
        assert np.array_equal(recs["not_i"], ~recs["i"])


def test_exhaustion_in_kernel_is_detectable_after_the_fact(stream):
    n, room = 1500, 1024                  # 16 * room: a multiple of 256, no rounding
    a = DeviceArena(4096, push_capacity=16 * room, stream=stream)
    guard = a.upload(np.full(1024, 7, dtype=np.uint8))              # the carve region right after
    assert _push_tagged(a, n, stream) == n - room                   # exactly the overflow failed
    assert a.pushed() == 16 * n and a.overflowed()                   # the header says what was asked
    assert a.pushes(TAG).shape == (room,)
    assert (guard.get() == 7).all()                                  # nothing written past the region


def test_reset_pushes_is_an_8_byte_memset(stream):
    a = DeviceArena(0, push_capacity=1024, stream=stream)
    _push_tagged(a, 10, stream)
    assert a.pushed() == 160
    view = a.push_region()
    assert isinstance(view, cp.ndarray) and view.nbytes == 160 and view.data.ptr == a.ptr + HEADER_BYTES
    assert sorted(view.view(cp.uint32).get()[0::4].tolist()) == list(range(10))
    with pytest.raises(BufferError, match="still alive"):
        a.reset_pushes()
    with pytest.raises(BufferError, match="still alive"):
        a.reset()
    del view
    gc.collect()
    a.reset_pushes()
    assert a.pushed() == 0
    # Only `used` was cleared: the header's capacity word and the old records are untouched.
    raw = np.zeros(HEADER_BYTES + 160, dtype=np.uint8)
    a.download_pushes(raw)
    stream.synchronize()
    assert int(raw[8:16].view(np.uint64)[0]) == 1024
    recs = raw[HEADER_BYTES:].view(TAG)
    assert sorted(recs["i"].tolist()) == list(range(10))
    recs_after, asked = a.pushes_from(raw, TAG)
    assert asked == 0 and recs_after.size == 0


def test_download_pushes_async_into_pinned(stream):
    n = 300
    host = PinnedArena(1 << 16)
    a = DeviceArena(0, push_capacity=16 * n, stream=stream)
    out = host.empty(HEADER_BYTES + 16 * n, np.uint8)
    a.reset_pushes()
    launch(get_function("alloc_arena", "dod_push_tagged"), n,
           (np.int32(n), a.header, cp.zeros(1, dtype=cp.uint64)), stream=stream)
    a.download_pushes(out)
    stream.synchronize()
    recs, asked = a.pushes_from(out, TAG)
    assert asked == 16 * n and recs.shape == (n,)
    assert sorted(recs["i"].tolist()) == list(range(n))
    with pytest.raises(ValueError):
        a.download_pushes(np.zeros(10, np.uint8))


@needs_real_gpu("the stand-in cannot compile kernels (only dod.cuda's own are re-implemented in Python)")
def test_user_kernel_with_arena_source(stream):
    src = kernels.ARENA_SOURCE + r"""
    extern "C" __global__ void squares(int n, dod_gpu_arena* a) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i >= n) return;
        long long* p = (long long*)dod_gpu_arena_push(a, 16);
        if (p) { p[0] = i; p[1] = (long long)i * i; }
    }
    """
    k = cp.RawModule(code=src).get_function("squares")
    a = DeviceArena(0, push_capacity=16 * 64, stream=stream)
    launch(k, 64, (np.int32(64), a.header), stream=stream)
    recs = a.pushes(np.dtype([("i", np.int64), ("sq", np.int64)]))
    assert sorted(recs["sq"].tolist()) == [i * i for i in range(64)]


# ---------------------------------------------------------------- pinned host arena

def test_pinned_arena_is_page_locked_and_uploads_async(stream):
    host = PinnedArena(1 << 20)
    assert isinstance(host, dod.Arena)
    x = host.empty(1000, np.float32)
    x[:] = np.arange(1000, dtype=np.float32)
    attrs = cp.cuda.runtime.pointerGetAttributes(x.ctypes.data)
    kind = getattr(attrs, "type", getattr(attrs, "memoryType", None))
    assert kind == cp.cuda.runtime.cudaMemoryTypeHost                # page-locked, known to CUDA
    dev = DeviceArena(1 << 16, stream=stream)
    d = dev.upload(x)
    back = host.empty(1000, np.float32)
    cp.cuda.runtime.memcpyAsync(back.ctypes.data, d.data.ptr, 4000, 2, stream.ptr)
    stream.synchronize()
    assert np.array_equal(back, x)
    with pytest.raises(BufferError):
        host.reset()
    del x, back
    host.reset()


# ---------------------------------------------------------------- routing CuPy's allocations

def test_scope_routes_cupy_allocations_and_rewinds(stream):
    a = DeviceArena(1 << 20, stream=stream)
    before = a.used
    with stream:
        with a.scope() as s:
            x = cp.arange(1000, dtype=cp.float32)
            y = x * 2 + 1                        # temporaries too
            total = float(y.sum())
            assert _inside(a, x.data.ptr, x.nbytes) and _inside(a, y.data.ptr, y.nbytes)
            del x, y
        assert s.allocations >= 2 and s.bytes >= 8000 and s.escaped == []
    assert total == float(sum(2 * i + 1 for i in range(1000)))
    assert a.used == before                      # rewound at exit
    z = cp.empty(10, dtype=cp.float32)           # the previous allocator is back
    assert not _inside(a, z.data.ptr)


def test_scope_escape_rule(stream):
    a = DeviceArena(1 << 20, stream=stream)
    with stream:
        with pytest.warns(EscapeWarning, match="still alive"):
            with a.scope() as s:
                tmp = cp.zeros(256, dtype=cp.float32)
                kept = cp.full(100, 5, dtype=cp.int32)
                del tmp
        assert len(s.escaped) == 1 and s.escaped[0][1] >= 400
        assert a.used >= s.escaped[0][0] + s.escaped[0][1]       # not rewound under `kept`
        with a.scope():                                            # later allocations go above it
            other = cp.full(100, 9, dtype=cp.int32)
            assert other.data.ptr >= kept.data.ptr + kept.nbytes
            del other
    stream.synchronize()
    assert (kept.get() == 5).all()
    del kept
    gc.collect()
    a.reset()
    assert a.used == 0


def test_scope_exhaustion_raises_memoryerror_and_restores_allocator(stream):
    a = DeviceArena(4096, stream=stream)
    with stream:
        with pytest.raises(MemoryError):
            with a.scope():
                cp.empty(1 << 20, dtype=cp.uint8)
    big = cp.empty(1 << 20, dtype=cp.uint8)       # default allocator again
    assert not _inside(a, big.data.ptr)
    assert a.failed == 1


def test_scope_can_be_entered_once(stream):
    a = DeviceArena(4096, stream=stream)
    s = a.scope()
    with s:
        pass
    with pytest.raises(RuntimeError, match="once"):
        with s:
            pass


# ---------------------------------------------------------------- the frame

def test_arena_frame_matches_allocating_and_cpu():
    from dod.cuda.frame import ArenaFrame, allocating_frame, reference_hits, sorted_hits

    n = 1000
    frame = ArenaFrame(n)
    idx = np.arange(n, dtype=np.float32)
    for f in range(20):
        want = reference_hits(f, n)
        got = sorted_hits(frame.run(f))
        with cp.cuda.using_allocator(None):
            raw = sorted_hits(allocating_frame(f, n, idx=idx))
        pooled = sorted_hits(allocating_frame(f, n, idx=idx))
        assert 0 < want.size < n
        assert np.array_equal(got, want), f"frame {f}"
        assert np.array_equal(raw, want) and np.array_equal(pooled, want)
    # Steady state: nothing accumulates from frame to frame.
    assert frame.host.used == frame._host_start.position
    assert frame.device.used == frame._device_start.position
    assert frame.device.failed == 0 and frame.frames == 20


def test_arena_frame_odd_sizes():
    from dod.cuda.frame import ArenaFrame, reference_hits, sorted_hits

    for n in (1, 255, 257, 4097):
        frame = ArenaFrame(n, threshold=0.25)
        for f in (0, 3):
            assert np.array_equal(sorted_hits(frame.run(f)), reference_hits(f, n, 0.25))


# ---------------------------------------------------------------- kernels and benchmarks run

@needs_real_gpu("the stand-in cannot compile kernels (it only lists their names)")
def test_all_kernel_modules_compile():
    for name in kernels.SOURCES:
        mod = kernels.get_module(name)
        for k in kernels._kernel_names(kernels.SOURCES[name]):
            assert mod.get_function(k) is not None


@needs_real_gpu("the stand-in has no device heap (device malloc is a Python bytearray there)")
def test_device_malloc_kernel_runs(stream):
    sink = cp.zeros(1, dtype=cp.uint64)
    k = get_function("alloc_malloc", "dod_alloc_malloc")
    launch(k, 1000, (np.int32(1000), np.uint64(16), sink), stream=stream)
    stream.synchronize()
    assert int(sink.get()[0]) == 0               # no device malloc failed


@pytest.mark.parametrize("section", ["frame", "in-kernel", "columns"])
def test_bench_sections_run(section):
    # Checks that each section runs, checks its own results and renders; the
    # numbers themselves mean something only on a GPU (run_gpu_checks.sh).
    from dod.cuda import bench

    with warnings.catch_warnings():
        warnings.simplefilter("error", EscapeWarning)
        sec = bench.SECTIONS[section](quick=True)
    assert sec.rows
    for row in sec.rows:
        assert row.value > 0 or "not measured" in row.note, (row.name, row.value, row.note)
    assert bench.render(sec, markdown=True).count("|") > 8
