"""A stand-in for the slice of CuPy that dod.cuda uses, running on host memory.

NOT a GPU emulator and no proof that dod.cuda works on a GPU: it lets the GPU
test suite run on a machine without one (``DOD_FAKE_CUPY=1 python -m pytest
tests/gpu``) so that dod.cuda's Python-level logic, and the tests' own
logic, are exercised before the first real run. Signatures follow CuPy's
documented API (cupy.cuda.Memory/UnownedMemory/MemoryPointer, runtime.memcpy,
memcpyAsync, memsetAsync, mallocAsync/freeAsync, using_allocator, RawModule
...); "device" memory is host memory; streams run everything at once; the
kernels dod.cuda ships are re-implemented in Python (threads in a shuffled
order, as a GPU gives no order).
"""
import contextlib
import ctypes
import operator
import random
import re
import threading
import time
import types

import numpy as np

__version__ = "0.0-fake"
float32, float64 = np.float32, np.float64
int32, int64, uint8, uint32, uint64 = np.int32, np.int64, np.uint8, np.uint32, np.uint64

_local = threading.local()
_pinned_ranges = []


def _index(x, what):
    try:
        return operator.index(x)
    except TypeError:
        raise TypeError(f"{what}: an integer is required, got {type(x).__name__}") from None


# ---------------------------------------------------------------- memory

class BaseMemory:
    ptr = 0
    size = 0
    device_id = 0


class Memory(BaseMemory):
    """cudaMalloc'd memory, freed when collected (here: a numpy buffer)."""
    live = 0

    def __init__(self, size):
        size = _index(size, "Memory(size)")
        self._buf = np.zeros(size + 512, dtype=np.uint8)
        base = self._buf.ctypes.data
        self.ptr = (base + 511) & ~511
        self.size = size
        self.device_id = 0
        Memory.live += 1

    def __del__(self):
        Memory.live -= 1


class UnownedMemory(BaseMemory):
    def __init__(self, ptr, size, owner, device_id=-1):
        self.ptr = _index(ptr, "UnownedMemory(ptr)")
        self.size = _index(size, "UnownedMemory(size)")
        self._owner = owner
        self.device_id = 0 if device_id == -1 else device_id


class MemoryPointer:
    def __init__(self, mem, offset):
        if not isinstance(mem, BaseMemory):
            raise TypeError("MemoryPointer(mem): mem must be a BaseMemory")
        self.mem = mem
        self.ptr = mem.ptr + _index(offset, "offset")


def _default_allocator(size):
    return MemoryPointer(Memory(size), 0)


def _current_allocator():
    return getattr(_local, "allocator", None) or _default_allocator


@contextlib.contextmanager
def _using_allocator(allocator=None):
    prev = getattr(_local, "allocator", None)
    _local.allocator = allocator if allocator is not None else _default_allocator
    try:
        yield
    finally:
        _local.allocator = prev


def _alloc(nbytes):
    return _current_allocator()(nbytes)


class MemoryAsyncPool:
    def __init__(self, pool_handles="current"):
        self._limit = 0

    def malloc(self, size):
        return MemoryPointer(Memory(size), 0)

    def set_limit(self, size=None, fraction=None):
        self._limit = size or 0

    def get_limit(self):
        return self._limit


def alloc_pinned_memory(size):
    buf = bytearray(_index(size, "size"))
    start = np.frombuffer(buf, dtype=np.uint8).ctypes.data if size else 0
    _pinned_ranges.append((start, start + size, buf))
    return buf


# ---------------------------------------------------------------- arrays

def _view(ptr, shape, dtype):
    dtype = np.dtype(dtype)
    nbytes = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
    if nbytes == 0:
        return np.zeros(shape, dtype)
    raw = (ctypes.c_uint8 * nbytes).from_address(ptr)
    return np.frombuffer(raw, dtype=np.uint8).view(dtype).reshape(shape)


class ndarray:
    def __init__(self, shape, dtype=float, memptr=None, strides=None, order="C"):
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        dtype = np.dtype(dtype)
        nbytes = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        if memptr is None:
            memptr = _alloc(nbytes)
        if not isinstance(memptr, MemoryPointer):
            raise TypeError("memptr must be a MemoryPointer")
        self.data = memptr
        self._a = _view(memptr.ptr, shape, dtype)

    @classmethod
    def _wrap(cls, a, mem):
        self = cls.__new__(cls)
        self.data = MemoryPointer(mem, (a.ctypes.data - mem.ptr) if a.nbytes else 0)
        self._a = a
        return self

    @classmethod
    def _new(cls, values):
        values = np.asarray(values)
        out = cls(values.shape, values.dtype)
        out._a[...] = values
        return out

    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    nbytes = property(lambda self: self._a.nbytes)
    size = property(lambda self: self._a.size)

    def view(self, dtype):
        return ndarray._wrap(self._a.view(dtype), self.data.mem)

    def get(self, stream=None):
        return self._a.copy()

    def __getitem__(self, key):
        v = self._a[key]
        if not isinstance(v, np.ndarray):       # a scalar: take the 0-d view instead
            v = self._a[(key if isinstance(key, tuple) else (key,)) + (Ellipsis,)]
        return ndarray._wrap(v, self.data.mem)

    def __setitem__(self, key, value):
        self._a[key] = value._a if isinstance(value, ndarray) else value

    def _other(self, o):
        return o._a if isinstance(o, ndarray) else o

    def __mul__(self, o):
        return ndarray._new(self._a * self._other(o))

    def __add__(self, o):
        return ndarray._new(self._a + self._other(o))

    def __iadd__(self, o):
        self._a += self._other(o)
        return self

    def sum(self):
        return ndarray._new(self._a.sum())

    def __float__(self):
        return float(self._a)

    def __int__(self):
        return int(self._a)

    def __len__(self):
        return len(self._a)


def empty(shape, dtype=float):
    return ndarray(shape, dtype)


def zeros(shape, dtype=float):
    out = ndarray(shape, dtype)
    out._a[...] = 0
    return out


def full(shape, fill_value, dtype=None):
    out = ndarray(shape, dtype if dtype is not None else np.asarray(fill_value).dtype)
    out._a[...] = fill_value
    return out


def arange(n, dtype=None):
    return ndarray._new(np.arange(n, dtype=dtype))


def asarray(a, dtype=None):
    if isinstance(a, ndarray):
        return a
    return ndarray._new(np.asarray(a, dtype=dtype))


# ---------------------------------------------------------------- streams and events

class Stream:
    def __init__(self, null=False, non_blocking=False, ptr=0):
        self.ptr = 0 if null else id(self)

    def synchronize(self):
        pass

    def __enter__(self):
        stack = getattr(_local, "streams", None)
        if stack is None:
            stack = _local.streams = []
        stack.append(self)
        return self

    def __exit__(self, *exc):
        _local.streams.pop()
        return False


Stream.null = Stream(null=True)


def get_current_stream():
    stack = getattr(_local, "streams", None)
    return stack[-1] if stack else Stream.null


class Event:
    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self.t = None

    def record(self, stream=None):
        self.t = time.perf_counter()

    def synchronize(self):
        pass


def get_elapsed_time(start, end):
    return (end.t - start.t) * 1e3


# ---------------------------------------------------------------- runtime

class _Runtime(types.SimpleNamespace):
    pass


_allocs = {}
_pool_attrs = {}


def _rt_malloc(size):
    m = Memory(size)
    _allocs[m.ptr] = m
    return m.ptr


def _rt_free(ptr):
    del _allocs[_index(ptr, "ptr")]


def _memcpy(dst, src, size, kind, stream=0):
    dst, src, size = _index(dst, "dst"), _index(src, "src"), _index(size, "size")
    _index(kind, "kind")
    _index(stream, "stream")
    ctypes.memmove(dst, src, size)


def _memset(ptr, value, size, stream=0):
    ctypes.memset(_index(ptr, "ptr"), _index(value, "value"), _index(size, "size"))
    _index(stream, "stream")


class _PointerAttributes:
    def __init__(self, ptr):
        self.type = 2
        for start, end, _ in _pinned_ranges:
            if start <= ptr < end:
                self.type = 1
        self.device = 0


runtime = _Runtime(
    getDeviceCount=lambda: 1,
    getDevice=lambda: 0,
    getDeviceProperties=lambda dev: {"name": b"fake GPU (host memory)"},
    runtimeGetVersion=lambda: 12040,
    driverGetVersion=lambda: 12040,
    deviceSynchronize=lambda: None,
    malloc=_rt_malloc,
    free=_rt_free,
    mallocAsync=lambda size, stream: _rt_malloc(size),
    freeAsync=lambda ptr, stream: _rt_free(ptr),
    memcpy=lambda dst, src, size, kind: _memcpy(dst, src, size, kind),
    memcpyAsync=_memcpy,
    memsetAsync=_memset,
    deviceGetMemPool=lambda dev: 1,
    memPoolGetAttribute=lambda pool, attr: _pool_attrs.get((pool, attr), 0),
    memPoolSetAttribute=lambda pool, attr, value: _pool_attrs.__setitem__((pool, attr), value),
    cudaMemPoolAttrReleaseThreshold=4,
    cudaMemoryTypeHost=1,
    cudaMemoryTypeDevice=2,
    pointerGetAttributes=lambda ptr: _PointerAttributes(_index(ptr, "ptr")),
)


# ---------------------------------------------------------------- kernels

def _u64(ptr):
    return ctypes.c_uint64.from_address(ptr)


def _push(hdr, nbytes):
    n = (nbytes + 15) & ~15
    used = _u64(hdr)
    off = used.value
    used.value = off + n
    cap = _u64(hdr + 8).value
    if off > cap or n > cap - off:
        return 0
    return hdr + 256 + off


def _write_hit(p, i, s, x, y):
    ctypes.c_int32.from_address(p).value = int(i)
    ctypes.c_float.from_address(p + 4).value = float(s)
    ctypes.c_float.from_address(p + 8).value = float(x)
    ctypes.c_float.from_address(p + 12).value = float(y)


def _threads(n):
    order = list(range(n))
    random.shuffle(order)
    return order


def _k_threshold_arena(score, x, y, n, thr, hits):
    for i in _threads(n):
        if score._a[i] > np.float32(thr):
            p = _push(hits, 16)
            if p:
                _write_hit(p, i, score._a[i], x._a[i], y._a[i])


def _k_threshold_counter(score, x, y, n, thr, count, out):
    for i in _threads(n):
        if score._a[i] > np.float32(thr):
            k = int(count._a[0])
            count._a[0] = k + 1
            if k < n:
                _write_hit(out.data.ptr + 16 * k, i, score._a[i], x._a[i], y._a[i])


def _k_empty(n, sink):
    pass


def _k_alloc_arena(n, nbytes, a, sink):
    for i in _threads(n):
        p = _push(a, nbytes)
        if not p:
            sink._a[0] += 1
        else:
            ctypes.c_uint8.from_address(p).value = i & 0xFF


def _k_alloc_malloc(n, nbytes, sink):
    for _ in range(n):
        bytearray(nbytes)


def _k_push_tagged(n, a, failed):
    for i in _threads(n):
        p = _push(a, 16)
        if not p:
            failed._a[0] += 1
            continue
        rec = (ctypes.c_uint32 * 4).from_address(p)
        rec[0], rec[1], rec[2], rec[3] = i, (~i) & 0xFFFFFFFF, 16, 0


def _k_squares(n, a):
    for i in _threads(n):
        p = _push(a, 16)
        if p:
            rec = (ctypes.c_int64 * 2).from_address(p)
            rec[0], rec[1] = i, i * i


_KERNELS = {
    "dod_threshold_arena": _k_threshold_arena,
    "dod_threshold_counter": _k_threshold_counter,
    "dod_empty": _k_empty,
    "dod_alloc_arena": _k_alloc_arena,
    "dod_alloc_malloc": _k_alloc_malloc,
    "dod_push_tagged": _k_push_tagged,
    "squares": _k_squares,
}


def _arg(a):
    if isinstance(a, ndarray):
        return a
    if isinstance(a, (np.generic, int, float, bool)):
        return a.item() if isinstance(a, np.generic) else a
    raise TypeError(f"unsupported kernel argument type {type(a).__name__}")


class RawKernel:
    def __init__(self, name):
        self.name = name

    def __call__(self, grid, block, args, *, shared_mem=0):
        if not (isinstance(grid, tuple) and isinstance(block, tuple)):
            raise TypeError("grid and block must be tuples")
        if not isinstance(args, tuple):
            raise TypeError("args must be a tuple")
        args = [_arg(a) for a in args]
        threads = int(np.prod(grid)) * int(np.prod(block))
        n = args[0] if self.name not in ("dod_threshold_arena", "dod_threshold_counter") else args[3]
        if threads < n:
            raise AssertionError(f"launch of {threads} threads for n = {n}")
        _KERNELS[self.name](*args)


class RawModule:
    def __init__(self, code=None, *, backend="nvrtc", options=(), **kwargs):
        self.names = set(re.findall(r'extern "C" __global__ void (\w+)\(', code))

    def get_function(self, name):
        if name not in self.names:
            raise RuntimeError(f"CUDA_ERROR_NOT_FOUND: named symbol not found: {name}")
        return RawKernel(name)


cuda = types.SimpleNamespace(
    Memory=Memory, UnownedMemory=UnownedMemory, MemoryPointer=MemoryPointer, BaseMemory=BaseMemory,
    MemoryAsyncPool=MemoryAsyncPool, alloc_pinned_memory=alloc_pinned_memory,
    using_allocator=_using_allocator, Stream=Stream, Event=Event, get_elapsed_time=get_elapsed_time,
    get_current_stream=get_current_stream, runtime=runtime,
)
