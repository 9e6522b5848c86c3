"""dod.cuda without a GPU: imports, errors, validation, host bookkeeping, and
the CUDA kernel sources compiled and run on the CPU with g++ (CUDA's built-ins
emulated sequentially), so their logic is checked everywhere.

What needs a real GPU is in tests/gpu/ (run by tests/gpu/run_gpu_checks.sh).
"""
import os
import shutil
import subprocess
import sys
import types
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import dod
import dod.cuda
from dod.cuda import kernels
from dod.cuda._bump import Bump, array_request, check_align, check_capacity
from dod.cuda.device_arena import read_pushes, record_dtype
from dod.cuda.frame import HIT, detections, reference_hits

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def no_cupy(monkeypatch):
    """Make `import cupy` fail, as on a machine without it (and forget kernels
    compiled by earlier GPU tests in this process)."""
    monkeypatch.setitem(sys.modules, "cupy", None)
    monkeypatch.setattr(kernels, "_modules", {})


@pytest.fixture
def fake_cupy_pinned(monkeypatch):
    """A stand-in CuPy that only hands out 'pinned' memory (plain bytearrays)."""
    cp = types.ModuleType("cupy")
    # Page-locked memory from CUDA is not zeroed: hand out a non-zero pattern.
    cp.cuda = types.SimpleNamespace(alloc_pinned_memory=lambda n: bytearray(b"\xa5" * n))
    monkeypatch.setitem(sys.modules, "cupy", cp)
    return cp


@pytest.fixture
def stand_in(monkeypatch):
    """tests/gpu/fake_cupy.py installed as `cupy` (host memory, strict about
    pointers and streams; see its docstring)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("fake_cupy", ROOT / "tests" / "gpu" / "fake_cupy.py")
    cp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cp)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(kernels, "_modules", {})
    return cp


@pytest.fixture
def cupy_without_device(monkeypatch):
    """A stand-in CuPy whose runtime sees no device (as on a machine without a driver)."""
    cp = types.ModuleType("cupy")

    def get_device_count():
        raise RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")

    cp.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=get_device_count))
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(kernels, "_modules", {})
    return cp


# ---------------------------------------------------------------- importing and errors

def test_import_needs_no_cupy():
    code = ("import sys; sys.modules['cupy'] = None\n"
            "import dod, dod.cuda, dod.cuda.kernels, dod.cuda.device_arena, dod.cuda.pinned_arena,"
            " dod.cuda.frame, dod.cuda.bench\n"
            "assert dod.cuda.is_available() is False\n"
            "assert 'DeviceArena' in dir(dod.cuda)\n"
            "print(dod.cuda.DeviceArena.__name__, dod.cuda.PinnedArena.__name__)\n")
    out = subprocess.run([sys.executable, "-P", "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, PYTHONPATH=dod.get_include()))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["DeviceArena", "PinnedArena"]


def test_unknown_attribute():
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        dod.cuda.Nope


@pytest.mark.parametrize("use", [
    lambda: dod.cuda.DeviceArena(1024),
    lambda: dod.cuda.DeviceArena(0, push_capacity=256),
    lambda: dod.cuda.PinnedArena(1024),
    lambda: kernels.get_module("threshold"),
    lambda: __import__("dod.cuda.frame", fromlist=["ArenaFrame"]).ArenaFrame(10),
    lambda: __import__("dod.cuda.frame", fromlist=["x"]).allocating_frame(0, 10),
], ids=["device-arena", "push-only-arena", "pinned-arena", "kernels", "arena-frame", "allocating-frame"])
def test_gpu_feature_without_cupy_raises_importerror(no_cupy, use):
    with pytest.raises(ImportError, match="pip install cupy-cuda12x"):
        use()
    assert dod.cuda.is_available() is False


def test_gpu_feature_without_device_raises_runtimeerror(cupy_without_device):
    assert dod.cuda.is_available() is False
    with pytest.raises(RuntimeError, match="no CUDA device is usable.*cudaErrorNoDevice"):
        dod.cuda.DeviceArena(1024)
    with pytest.raises(RuntimeError, match="no CUDA device"):
        kernels.get_module("alloc_arena")


def test_unknown_kernel_module_is_keyerror():
    with pytest.raises(KeyError, match="no kernel module 'nope'"):
        kernels.get_module("nope")


@pytest.mark.parametrize("args, kwargs, exc, match", [
    ((0,), {}, ValueError, "capacity > 0 or push_capacity > 0"),
    ((-1,), {}, ValueError, "non-negative"),
    (("64",), {}, TypeError, "integer number of bytes"),
    ((1.5,), {}, TypeError, "integer number of bytes"),
    ((2 ** 49,), {}, ValueError, "absurd"),
    ((16,), {"push_capacity": -16}, ValueError, "push_capacity must be non-negative"),
    ((16,), {"push_capacity": None}, TypeError, "push_capacity must be an integer"),
])
def test_device_arena_validates_before_touching_cuda(no_cupy, args, kwargs, exc, match):
    # With CuPy blocked, reaching CUDA would be ImportError: bad input is refused first.
    with pytest.raises(exc, match=match):
        dod.cuda.DeviceArena(*args, **kwargs)


@pytest.mark.parametrize("cap, exc", [(0, ValueError), (-5, ValueError), ("1", TypeError), (2 ** 50, ValueError)])
def test_pinned_arena_validates_before_touching_cuda(no_cupy, cap, exc):
    with pytest.raises(exc):
        dod.cuda.PinnedArena(cap)


# ---------------------------------------------------------------- request validation

def test_array_request():
    assert array_request(5, np.float32) == ((5,), np.dtype(np.float32), 20)
    assert array_request((2, 3), "f8")[2] == 48
    assert array_request((0, 7), np.int16)[2] == 0
    assert array_request((), np.int64)[2] == 8
    with pytest.raises(TypeError, match="Python objects"):
        array_request(3, object)
    with pytest.raises(TypeError, match="no size"):
        array_request(3, "S")
    with pytest.raises(ValueError, match="negative"):
        array_request((3, -1), np.float32)
    with pytest.raises(TypeError, match="shape"):
        array_request("abc", np.float32)
    with pytest.raises(TypeError, match="not a dtype"):
        array_request(3, "not-a-dtype-at-all")


def test_check_align_and_capacity():
    assert check_align(None, 256, 256) == 256
    assert check_align(16, 256, 256) == 16
    for bad in (0, 3, -8):
        with pytest.raises(ValueError, match="power of two"):
            check_align(bad, 256, 256)
    with pytest.raises(ValueError, match="above the 256"):
        check_align(512, 256, 256)
    with pytest.raises(TypeError):
        check_align(2.0, 256, 256)
    assert check_capacity(0, allow_zero=True) == 0
    with pytest.raises(ValueError):
        check_capacity(0)


def test_record_dtype():
    assert record_dtype(HIT) == HIT
    assert HIT.itemsize == 16
    for bad in (np.float32, np.dtype([("a", "i4"), ("b", "f4"), ("c", "f4")]), object):
        with pytest.raises(ValueError, match="multiple of 16"):
            record_dtype(bad)


# ---------------------------------------------------------------- reading pushes back (host side)

def _readback(asked, records, room):
    buf = np.zeros(kernels.HEADER_BYTES + room, dtype=np.uint8)
    buf[:8].view(np.uint64)[0] = asked
    body = buf[kernels.HEADER_BYTES:].view(HIT)
    body[: len(records)] = records
    return buf


def test_read_pushes_counts_and_overflow():
    recs = np.zeros(10, dtype=HIT)
    recs["index"] = np.arange(10)
    buf = _readback(asked=7 * 16, records=recs[:7], room=10 * 16)
    hits, asked = read_pushes(buf, HIT, push_capacity=10 * 16)
    assert asked == 112 and hits.size == 7 and list(hits["index"]) == list(range(7))
    assert hits.base is not None and np.shares_memory(hits, buf)      # a view, no copy
    # Overflow: the header records the demand; only what fits is read.
    buf = _readback(asked=25 * 16, records=recs, room=10 * 16)
    hits, asked = read_pushes(buf, HIT, push_capacity=10 * 16)
    assert asked == 400 and hits.size == 10
    # A buffer shorter than the push region: records past its end are left out.
    hits, asked = read_pushes(buf[: kernels.HEADER_BYTES + 3 * 16], HIT, push_capacity=10 * 16)
    assert hits.size == 3 and asked == 400
    with pytest.raises(ValueError, match="less than the 256-byte header"):
        read_pushes(np.zeros(100, np.uint8), HIT, 160)
    with pytest.raises(TypeError):
        read_pushes(b"\0" * 512, HIT, 160)


# ---------------------------------------------------------------- Bump: model-based walk

class BumpMachine(RuleBasedStateMachine):
    """A random walk of pushes, marks, rewinds and array deaths against a shadow list."""

    CAPACITY = 4096

    def __init__(self):
        super().__init__()
        self.bump = Bump(self.CAPACITY)
        self.live = []          # (lease, start, end) the model holds alive
        self.marks = []
        self.allocations = 0
        self.failed = 0
        self.peak = 0

    @rule(nbytes=st.integers(0, 1500), align_log=st.integers(0, 8))
    def push(self, nbytes, align_log):
        align = 1 << align_log
        before = (self.bump.used, self.bump.allocations)
        start = (self.bump.used + align - 1) & ~(align - 1)
        fits = start + nbytes <= self.CAPACITY
        if fits:
            off, lease = self.bump.push(nbytes, align, self)
            assert off == start and off % align == 0
            assert lease.start == off and lease.end == off + nbytes
            for other, s, e in self.live:
                assert off >= e or off + nbytes <= s or nbytes == 0 or e == s   # no overlap
            self.live.append((lease, off, off + nbytes))
            self.allocations += 1
        else:
            with pytest.raises(MemoryError, match="exhausted"):
                self.bump.push(nbytes, align, self)
            self.failed += 1
            assert (self.bump.used, self.bump.allocations) == before      # unchanged
        self.peak = max(self.peak, self.bump.used)

    @rule()
    def mark(self):
        self.marks.append(self.bump.used)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def drop(self, data):
        i = data.draw(st.integers(0, len(self.live) - 1))
        del self.live[i]

    @precondition(lambda self: self.marks)
    @rule(data=st.data(), unchecked=st.booleans())
    def rewind(self, data, unchecked):
        pos = self.marks[data.draw(st.integers(0, len(self.marks) - 1))]
        used = self.bump.used
        if pos > used:
            with pytest.raises(ValueError, match="beyond"):
                self.bump.release_to(pos, unchecked)
            assert self.bump.used == used
            return
        blocked = [e for _, _, e in self.live if e > pos]
        if blocked and not unchecked:
            with pytest.raises(BufferError, match="still alive"):
                self.bump.release_to(pos, unchecked)
            assert self.bump.used == used
            return
        self.bump.release_to(pos, unchecked)
        assert self.bump.used == pos
        if unchecked:           # the caller owns the aliasing: forget what lies above
            self.live = [x for x in self.live if x[2] <= pos]
        self.marks = [m for m in self.marks if m <= pos]

    @invariant()
    def consistent(self):
        b = self.bump
        b.check()
        assert b.allocations == self.allocations and b.failed == self.failed
        assert b.peak == max(self.peak, b.used)
        top = max([e for _, s, e in self.live if e > 0] + [0])
        assert b.pinned_above(0) == top


TestBumpModel = BumpMachine.TestCase


def test_bump_lease_keeps_owner_alive():
    class Owner:
        pass

    b = Bump(1024)
    owner = Owner()
    import weakref

    ref = weakref.ref(owner)
    _, lease = b.push(100, 16, owner)
    del owner
    assert ref() is not None            # the lease holds its owner
    with pytest.raises(BufferError):
        b.release_to(0, False)
    del lease
    assert ref() is None
    b.release_to(0, False)
    assert b.used == 0 and b.peak == 100


# ---------------------------------------------------------------- PinnedArena (stand-in pinned memory)

def test_pinned_arena_is_an_arena_with_its_lifetime_rules(fake_cupy_pinned):
    a = dod.cuda.PinnedArena(4096)
    assert isinstance(a, dod.Arena)
    assert a.capacity == 4096 and a.used == 0
    assert a.ptr != 0
    x = a.empty(100, np.float32)
    x[:] = np.arange(100)
    with pytest.raises(BufferError):
        a.reset()
    assert a.used >= 400                # unchanged by the refused reset
    m = a.mark()
    y = a.zeros(10, np.int64)
    assert not np.shares_memory(x, y) and (y == 0).all()
    del y
    a.rewind(m)
    del a                               # the view keeps the pinned block alive
    assert x[99] == 99.0
    with pytest.raises(MemoryError, match="exhausted"):
        b = dod.cuda.PinnedArena(256)
        b.empty(300, np.uint8)
    assert "PinnedArena" in repr(dod.cuda.PinnedArena(64))


def test_pinned_arena_uses_cupy_pinned_allocator(monkeypatch):
    seen = []
    cp = types.ModuleType("cupy")

    def alloc(n):
        seen.append(n)
        return bytearray(n)

    cp.cuda = types.SimpleNamespace(alloc_pinned_memory=alloc)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    a = dod.cuda.PinnedArena(1000)
    # The arena's grain (16 bytes) may trim an unaligned stand-in buffer.
    assert seen == [1000] and 1000 - 31 <= a.capacity <= 1000


def test_pinned_arena_read_only_export_falls_back_to_the_address(monkeypatch):
    class ReadOnlyPinned(np.ndarray):
        """A pinned pointer whose buffer export is read-only but has .ptr."""

    keep = []

    def alloc(n):
        backing = np.zeros(n, dtype=np.uint8)
        keep.append(backing)
        ro = backing.view(ReadOnlyPinned)
        ro.flags.writeable = False
        ro.ptr = backing.ctypes.data
        return ro

    cp = types.ModuleType("cupy")
    cp.cuda = types.SimpleNamespace(alloc_pinned_memory=alloc)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    a = dod.cuda.PinnedArena(512)
    x = a.empty(4, np.uint32)
    x[:] = [1, 2, 3, 4]
    assert a.ptr == keep[0].ctypes.data
    assert list(keep[0][:16].view(np.uint32)) == [1, 2, 3, 4]     # the same bytes


# ---------------------------------------------------------------- the frame's CPU side

def test_detections_same_bits_in_place_or_allocating(fake_cupy_pinned):
    n = 1000
    idx = np.arange(n, dtype=np.float32)
    arena = dod.cuda.PinnedArena(3 * 4096)
    for frame in (0, 1, 17, 12345):
        fresh = detections(frame, idx)
        cols = tuple(arena.empty(n, np.float32) for _ in range(3))
        placed = detections(frame, idx, cols)
        for a, b, c in zip(fresh, placed, cols):
            assert a.dtype == np.float32 and b is c
            assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
        assert 0.0 <= fresh[0].min() and fresh[0].max() <= 1.0
        assert np.abs(fresh[1]).max() <= 100.0 and np.abs(fresh[2]).max() <= 100.0
        del cols, placed, a, b, c
        arena.reset()


@given(frame=st.integers(0, 10 ** 6), n=st.integers(1, 3000), threshold=st.floats(0.0, 1.0))
def test_reference_hits(frame, n, threshold):
    hits = reference_hits(frame, n, threshold)
    score, x, y = detections(frame, np.arange(n, dtype=np.float32))
    assert hits.dtype == HIT
    assert np.all(np.diff(hits["index"]) > 0)
    assert np.all(hits["score"] > np.float32(threshold))
    assert hits.size == int(np.count_nonzero(score > np.float32(threshold)))
    assert np.array_equal(hits["x"], x[hits["index"]]) and np.array_equal(hits["y"], y[hits["index"]])


# ---------------------------------------------------------------- kernel sources, compiled and run by g++

def test_kernel_names():
    assert kernels._kernel_names(kernels.THRESHOLD_SOURCE) == ["dod_threshold_arena", "dod_threshold_counter"]
    assert kernels._kernel_names(kernels.ALLOC_ARENA_SOURCE) == ["dod_empty", "dod_alloc_arena", "dod_push_tagged"]
    assert kernels._kernel_names(kernels.ALLOC_MALLOC_SOURCE) == ["dod_alloc_malloc"]


_HARNESS = r"""
// CUDA built-ins emulated for a sequential CPU run: one "thread" at a time,
// so atomicAdd is a plain read-modify-write.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstddef>
#include <vector>
#include <algorithm>
#define __global__
#define __device__
#define __forceinline__ inline
struct dod_dim3 { unsigned x, y, z; };
static dod_dim3 blockIdx, blockDim, threadIdx;
static unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { unsigned long long o = *p; *p += v; return o; }
static unsigned int atomicAdd(unsigned int* p, unsigned int v) { unsigned int o = *p; *p += v; return o; }

@SOURCES@

template <class F> static void launch(int n, F f) {
    blockDim.x = 256;
    int blocks = (n + 255) / 256;
    for (int b = 0; b < blocks; b++)
        for (int t = 0; t < 256; t++) { blockIdx.x = b; threadIdx.x = t; f(); }
}

static int failures = 0;
#define CHECK(c) do { if (!(c)) { std::printf("FAIL line %d: %s\n", __LINE__, #c); failures++; } } while (0)

// An arena laid out as DeviceArena does it: header, push region, then a guard.
static dod_gpu_arena* make_arena(unsigned long long cap, unsigned char** guard) {
    unsigned char* mem = (unsigned char*)std::aligned_alloc(256, (256 + cap + 256 + 255) / 256 * 256);
    std::memset(mem, 0, 256);
    std::memset(mem + 256, 0xAB, cap + 256);
    dod_gpu_arena* a = (dod_gpu_arena*)mem;
    a->used = 0; a->capacity = cap;
    *guard = mem + 256 + cap;
    return a;
}
static bool guard_intact(unsigned char* g) { for (int i = 0; i < 256; i++) if (g[i] != 0xAB) return false; return true; }

int main() {
    CHECK(sizeof(dod_gpu_arena) == 256);
    CHECK(offsetof(dod_gpu_arena, used) == 0);          // the 8-byte reset memsets offset 0
    CHECK(offsetof(dod_gpu_arena, capacity) == 8);
    CHECK(sizeof(dod_hit) == 16);

    // 1000 pushes into room for exactly 1000: all succeed, tags intact, in bounds.
    unsigned char* guard;
    dod_gpu_arena* a = make_arena(1000 * 16, &guard);
    unsigned long long failed = 0;
    launch(1000, [&] { dod_push_tagged(1000, a, &failed); });
    CHECK(a->used == 16000 && failed == 0);
    std::vector<int> seen(1000, 0);
    unsigned int* rec = (unsigned int*)((char*)a + 256);
    for (int k = 0; k < 1000; k++) {
        unsigned int i = rec[4 * k];
        CHECK(i < 1000 && rec[4 * k + 1] == ~i && rec[4 * k + 2] == 16u);
        if (i < 1000) seen[i]++;
    }
    CHECK(std::count(seen.begin(), seen.end(), 1) == 1000);
    CHECK(guard_intact(guard));

    // Overflow: 1100 asked, 1000 fit; `used` records the demand; nothing written past the end.
    a->used = 0;                                          // what reset_pushes does on the device
    failed = 0;
    launch(1100, [&] { dod_push_tagged(1100, a, &failed); });
    CHECK(a->used == 1100ull * 16 && failed == 100);
    CHECK(guard_intact(guard));
    // A request larger than the whole region fails without wrapping around.
    a->used = 0;
    CHECK(dod_gpu_arena_push(a, 1000 * 16 + 1) == 0);
    CHECK(dod_gpu_arena_push(a, 16) == 0);                // `used` is past the end now: still refused
    CHECK(a->used == 1000 * 16 + 16 + 16);
    // Rounding: 1 byte takes 16, pointers stay 16-aligned.
    a->used = 0;
    void* p1 = dod_gpu_arena_push(a, 1);
    void* p2 = dod_gpu_arena_push(a, 17);
    void* p3 = dod_gpu_arena_push(a, 0);
    CHECK(p1 == (char*)a + 256 && p2 == (char*)a + 256 + 16 && p3 == (char*)a + 256 + 48);
    CHECK(a->used == 48 && ((size_t)p2 & 15) == 0);

    // The threshold kernels agree with each other and with a plain loop.
    const int n = 1000;
    std::vector<float> score(n), x(n), y(n);
    for (int i = 0; i < n; i++) { score[i] = (float)((i * 37) % 101) / 100.0f; x[i] = (float)i; y[i] = -(float)i; }
    a->used = 0;
    launch(n, [&] { dod_threshold_arena(score.data(), x.data(), y.data(), n, 0.5f, a); });
    unsigned int count = 0;
    std::vector<dod_hit> out(n);
    launch(n, [&] { dod_threshold_counter(score.data(), x.data(), y.data(), n, 0.5f, &count, out.data()); });
    int expect = 0;
    for (int i = 0; i < n; i++) expect += score[i] > 0.5f;
    CHECK((int)count == expect && a->used == (unsigned long long)expect * 16);
    dod_hit* hits = (dod_hit*)((char*)a + 256);
    for (int k = 0; k < expect; k++) {
        int i = hits[k].index;
        CHECK(hits[k].score == score[i] && hits[k].x == x[i] && hits[k].y == y[i] && score[i] > 0.5f);
        CHECK(out[k].index == hits[k].index);
    }

    // The benchmark kernels run: empty, arena allocation, device malloc (here libc's).
    unsigned long long sink = 0;
    a->used = 0;
    launch(1000, [&] { dod_empty(1000, &sink); });
    launch(1000, [&] { dod_alloc_arena(1000, 16, a, &sink); });
    launch(1000, [&] { dod_alloc_malloc(1000, 16, &sink); });
    CHECK(sink == 0 && a->used == 16000);
    std::free(a);
    std::printf("%s %d\n", failures ? "FAILED" : "OK", failures);
    return failures != 0;
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is needed to run the kernel sources on the CPU")
def test_kernel_sources_compile_and_run_on_cpu(tmp_path):
    sources = "\n".join([kernels.THRESHOLD_SOURCE,
                         kernels.ALLOC_ARENA_SOURCE.replace(kernels.ARENA_SOURCE, ""),
                         kernels.ALLOC_MALLOC_SOURCE])
    src = tmp_path / "harness.cpp"
    src.write_text(_HARNESS.replace("@SOURCES@", sources))
    exe = tmp_path / "harness"
    cmd = ["g++", "-std=c++17", "-O1", "-Wall", "-Wno-unused-parameter", "-Werror", "-o", str(exe), str(src)]
    build = subprocess.run(cmd + ["-fsanitize=address,undefined,float-cast-overflow"], capture_output=True, text=True,
                           timeout=240)
    if build.returncode != 0:       # a toolchain without the sanitizer runtimes: plain build
        build = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert build.returncode == 0, build.stderr
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
    env.pop("LD_PRELOAD", None)
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0 and run.stdout.strip() == "OK 0", run.stdout + run.stderr


# ---------------------------------------------------------------- the GPU check script and example

def test_gpu_script_is_present_and_parses():
    script = ROOT / "tests" / "gpu" / "run_gpu_checks.sh"
    assert os.access(script, os.X_OK)
    out = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    text = script.read_text()
    for step in ("build_ext --inplace", "pytest tests/gpu", "dod.cuda.bench", "examples/gpu_frame.py",
                 "dod.tracker.bench", "--only concurrent", "not available in this build",
                 "pytest tests/test_tracker_threads.py", "OMP_PROC_BIND=false", "-m dod.tracker ",
                 "tools/sort_triggers.py"):
        assert step in text
    out = subprocess.run(["bash", str(script), "--help"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "--stand-in" in out.stdout and "--quick" in out.stdout, out.stderr
    assert "set -u" not in out.stdout               # the header only, not the code after it
    out = subprocess.run(["bash", str(script), "--nope"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "unknown option" in out.stderr


def test_with_stand_in_runs_code_against_the_stand_in():
    runner = ROOT / "tests" / "gpu" / "with_stand_in.py"
    code = "import cupy, dod.cuda; print(cupy.IS_DOD_STAND_IN, dod.cuda.is_available())"
    out = subprocess.run([sys.executable, "-P", str(runner), "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, env=dict(os.environ, PYTHONPATH=dod.get_include()))
    assert out.returncode == 0 and out.stdout.split() == ["True", "True"], out.stdout + out.stderr


def test_example_without_cupy_says_why(tmp_path):
    code = ("import sys, runpy; sys.modules['cupy'] = None; sys.argv = ['gpu_frame.py'];"
            f"runpy.run_path({str(ROOT / 'examples' / 'gpu_frame.py')!r}, run_name='__main__')")
    out = subprocess.run([sys.executable, "-P", "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, PYTHONPATH=dod.get_include()))
    assert out.returncode == 2, out.stdout + out.stderr
    assert "needs CuPy" in out.stderr


def test_bench_without_cupy_says_why(no_cupy, capsys):
    from dod.cuda import bench

    assert list(bench.SECTIONS) == ["frame", "in-kernel", "columns"]
    assert bench.main(["--quick"]) == 2
    assert "needs CuPy" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        bench.main(["--only", "nope"])
    assert e.value.code == 2


# ---------------------------------------------------------------- the stand-in is strict

def test_stand_in_memory_starts_as_garbage(stand_in):
    cp = stand_in
    assert (cp.empty(4096, dtype=cp.uint8).get() != 0).all()
    assert (np.frombuffer(cp.cuda.alloc_pinned_memory(4096), np.uint8) != 0).all()
    assert (cp.zeros(4096, dtype=cp.uint8).get() == 0).all()


def test_stand_in_refuses_host_pointers_where_device_ones_are_due(stand_in):
    cp = stand_in
    rt = cp.cuda.runtime
    dev = cp.empty(64, dtype=cp.uint8)
    host = np.zeros(64, np.uint8)
    d, h = dev.data.ptr, host.ctypes.data
    for dst, src, kind in ((h, h, 1), (d, d, 1), (d, h, 2), (h, h, 2), (h, d, 3), (d, h, 0)):
        with pytest.raises(rt.CUDARuntimeError, match="cudaErrorInvalidValue"):
            rt.memcpy(dst, src, 64, kind)
    with pytest.raises(rt.CUDARuntimeError, match="cudaErrorInvalidValue"):
        rt.memsetAsync(h, 0, 64, 0)
    with pytest.raises(rt.CUDARuntimeError, match="cudaErrorInvalidValue"):
        rt.memcpy(d + 32, h, 64, 1)                       # runs past the device allocation
    with pytest.raises(TypeError, match="Unsupported type"):
        kernels.launch(cp.RawModule(code=kernels.ALLOC_ARENA_SOURCE).get_function("dod_empty"),
                       10, (np.int32(10), np.zeros(2, np.uint64)))
    with pytest.raises(TypeError, match="Unsupported type"):
        dev + host
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.asarray(dev)
    rt.memcpy(d, h, 64, 1)                                # the right kinds work
    rt.memcpy(h, d, 64, 2)
    assert (dev.get() == 0).all()
    assert rt.pointerGetAttributes(h).type == rt.cudaMemoryTypeUnregistered
    assert rt.pointerGetAttributes(d).type == rt.cudaMemoryTypeDevice


def test_stand_in_checks_kernel_arguments_against_the_c_signature(stand_in):
    cp = stand_in
    k = kernels.get_function("threshold", "dod_threshold_arena")
    f32 = cp.zeros(10, dtype=cp.float32)
    arena = dod.cuda.DeviceArena(0, push_capacity=256)
    good = (f32, f32, f32, np.int32(10), np.float32(0.5), arena.header)
    kernels.launch(k, 10, good)
    cp.cuda.runtime.deviceSynchronize()
    assert arena.pushed() == 0
    for i, bad, match in ((3, 10, "int64"),                       # Python int passes as long long
                          (4, 0.5, "float64"),                     # Python float passes as double
                          (0, cp.zeros(10, dtype=cp.float64), "not float32"),
                          (5, np.int32(arena.ptr & 0x7FFFFFFF), "8-byte integer address"),
                          (3, f32, "scalar is due")):
        args = list(good)
        args[i] = bad
        with pytest.raises(TypeError, match=match):
            kernels.launch(k, 10, tuple(args))
    with pytest.raises(TypeError, match="takes 6 arguments"):
        kernels.launch(k, 10, good[:5])


def test_stand_in_runs_async_work_only_when_waited_for(stand_in):
    cp = stand_in
    rt = cp.cuda.runtime
    s = cp.cuda.Stream(non_blocking=True)
    dev = cp.zeros(16, dtype=cp.uint8)
    pinned = np.frombuffer(cp.cuda.alloc_pinned_memory(16), np.uint8)
    before = pinned.copy()
    rt.memcpyAsync(pinned.ctypes.data, dev.data.ptr, 16, 2, s.ptr)     # into pinned: queued
    assert np.array_equal(pinned, before)
    rt.memcpy(np.zeros(16, np.uint8).ctypes.data, dev.data.ptr, 16, 2)  # legacy sync: not a non-blocking stream
    assert np.array_equal(pinned, before)
    s.synchronize()
    assert (pinned == 0).all()
    pinned[:] = 1
    rt.memcpyAsync(dev.data.ptr, pinned.ctypes.data, 16, 1, s.ptr)     # from pinned: read when it runs
    pinned[:] = 2                                                      # the race a GPU would have
    s.synchronize()
    assert (dev.get() == 2).all()
    page = np.full(16, 3, np.uint8)
    rt.memcpyAsync(dev.data.ptr, page.ctypes.data, 16, 1, s.ptr)       # from pageable: staged now
    page[:] = 4
    s.synchronize()
    assert (dev.get() == 3).all()
    blocking = cp.cuda.Stream()
    rt.memsetAsync(dev.data.ptr, 5, 16, blocking.ptr)
    assert (dev.get() == 5).all()                                      # get() on the legacy stream waits for it
    with pytest.raises(rt.CUDARuntimeError, match="cudaErrorInvalidResourceHandle"):
        rt.memsetAsync(dev.data.ptr, 0, 16, 12345)


def test_stand_in_catches_a_frame_without_its_sync(stand_in):
    """The frame's one sync matters under the stand-in: without it the hits are
    read from a readback buffer the GPU has not written yet."""
    from dod.cuda.frame import ArenaFrame, reference_hits, sorted_hits

    frame = ArenaFrame(500)
    assert np.array_equal(sorted_hits(frame.run(0)), reference_hits(0, 500))
    sync = frame.stream.synchronize
    frame.stream.synchronize = lambda: None
    try:
        hits = frame.run(1)             # the readback still holds frame 0's header and hits
        assert not np.array_equal(sorted_hits(hits), reference_hits(1, 500))
    except RuntimeError as e:           # or a header the GPU has not written says "overflow"
        assert "overflowed" in str(e)
    finally:
        del frame.stream.synchronize    # the class's method again
        sync()
    assert np.array_equal(sorted_hits(frame.run(2)), reference_hits(2, 500))


def test_gpu_suite_against_the_fake_cupy():
    """The GPU tests, run against tests/gpu/fake_cupy.py (host memory, kernels
    in Python): exercises DeviceArena, the scope, the frame and the bench code
    paths here. Not a GPU test: tests/gpu/run_gpu_checks.sh is."""
    # -P and PYTHONPATH: the child imports the same dod as this process (the
    # installed one in CI), never the source folder it runs in.
    env = dict(os.environ, DOD_FAKE_CUPY="1", PYTHONPATH=dod.get_include())
    out = subprocess.run([sys.executable, "-P", "-m", "pytest", "tests/gpu", "-q", "-rs", "-p", "no:cacheprovider",
                          "--confcutdir=tests/gpu"], cwd=ROOT, capture_output=True, text=True, env=env,
                         timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert " passed" in out.stdout
    # Skipped only what the stand-in cannot make meaningful, and saying so.
    reasons = [line.split(": ", 1)[1] for line in out.stdout.splitlines() if line.startswith("SKIPPED")]
    assert reasons and all(r.startswith("needs a real GPU: ") for r in reasons), reasons
