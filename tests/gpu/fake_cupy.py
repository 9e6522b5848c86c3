"""A stand-in for the slice of CuPy that dod.cuda uses, running on host memory.

NOT a GPU emulator and no proof that dod.cuda works on a GPU: it lets the GPU
test suite run on a machine without one (``DOD_FAKE_CUPY=1 python -m pytest
tests/gpu``) so that dod.cuda's Python-level logic, and the tests' own
logic, are exercised before the first real run. Signatures follow CuPy's
documented API (cupy.cuda.Memory/UnownedMemory/MemoryPointer, runtime.memcpy,
memcpyAsync, memsetAsync, mallocAsync/freeAsync, using_allocator, RawModule
...). Tests that need what it cannot give skip with a reason that starts
"needs a real GPU" (``IS_DOD_STAND_IN`` tells them where they run).

Where it is strict, so that passing under it means something:

- Garbage: device memory (``Memory``, ``runtime.malloc``/``mallocAsync``,
  hence every CuPy array and pool block) and pinned memory
  (``alloc_pinned_memory``) start filled with random bytes, none of them
  zero, as cudaMalloc and cudaHostAlloc promise nothing. A zero read back was
  written by someone.
- Device or host: "device" addresses are the fake allocations, registered
  while alive; everything else is host memory (pinned if it came from
  ``alloc_pinned_memory``, else pageable). A copy whose kind does not match
  its pointers (a host pointer where ``cudaMemcpyHostToDevice`` wants the
  device one, say), a memset of host memory, or a free of an unknown pointer
  raises ``runtime.CUDARuntimeError`` ("cudaErrorInvalidValue: invalid
  argument", as CUDA reports a bad pointer); a kernel or array operation
  touching memory that is not a live device allocation raises
  ``CUDARuntimeError`` ("cudaErrorIllegalAddress"). A numpy array given
  where a CuPy array is due (kernel argument, operand, assigned value) raises
  TypeError("Unsupported type ..."), and ``numpy.asarray`` of a CuPy array
  raises TypeError("Implicit conversion to a NumPy array is not allowed..."),
  as CuPy does. Kernel arguments are checked against the kernel's C
  signature (count, scalar dtype, pointer element dtype; Python int and
  float pass as long long and double, as in CuPy): where a GPU would
  silently misread an argument, the stand-in raises TypeError.
- Streams: async work is queued per stream and runs only when something
  waits for it: ``Stream.synchronize``, ``Event.synchronize``,
  ``deviceSynchronize``, a synchronous copy or ``get()`` (which, on the
  legacy default stream, wait for the blocking streams but not for
  non-blocking ones), and work enqueued behind it. So a missing sync reads
  stale or garbage bytes, and a pinned source rewritten before its async
  upload ran is uploaded rewritten, as on a GPU. CUDA's documented pageable
  rules hold: an async copy from pageable memory reads the source before it
  returns, one to pageable memory completes before it returns.

What it cannot do (tests needing it skip under it): compile kernels (the
kernels dod.cuda ships are re-implemented in Python, their threads run one
at a time in a shuffled order, so atomicAdd is never contended), device
malloc, run work concurrently, time anything meaningfully.
"""
import bisect
import contextlib
import ctypes
import operator
import random
import re
import threading
import time
import types
import weakref

import numpy as np

__version__ = "0.0-fake"
IS_DOD_STAND_IN = True
float32, float64 = np.float32, np.float64
int32, int64, uint8, uint32, uint64 = np.int32, np.int64, np.uint8, np.uint32, np.uint64

_local = threading.local()
_lock = threading.RLock()
_rng = np.random.default_rng(0xD0D)


def _index(x, what):
    try:
        return operator.index(x)
    except TypeError:
        raise TypeError(f"{what}: an integer is required, got {type(x).__name__}") from None


class CUDARuntimeError(RuntimeError):
    """As cupy.cuda.runtime.CUDARuntimeError: str is '<cudaError name>: <message>'."""

    def __init__(self, name, message):
        super().__init__(f"{name}: {message}")
        self.name = name


def _invalid(why):
    return CUDARuntimeError("cudaErrorInvalidValue", f"invalid argument ({why})")


def _illegal(ptr, nbytes):
    return CUDARuntimeError("cudaErrorIllegalAddress",
                            f"an illegal memory access was encountered ([{ptr:#x}, +{nbytes}) is not "
                            "live device memory)")


def _garbage(n):
    """n random bytes, none of them zero."""
    with _lock:
        return _rng.integers(1, 256, size=n, dtype=np.uint8)


class _Ranges:
    """Address ranges [start, end) alive now (device allocations, pinned blocks)."""

    def __init__(self):
        self.starts = []
        self.ends = {}

    def add(self, start, end):
        if end > start:
            with _lock:
                bisect.insort(self.starts, start)
                self.ends[start] = end

    def remove(self, start):
        with _lock:
            if start in self.ends:
                del self.ends[start]
                self.starts.pop(bisect.bisect_left(self.starts, start))

    def holds(self, ptr, nbytes):
        """True when [ptr, ptr + max(nbytes, 1)) lies inside one live range."""
        with _lock:
            i = bisect.bisect_right(self.starts, ptr) - 1
            return i >= 0 and ptr + max(nbytes, 1) <= self.ends[self.starts[i]]

    def touches(self, ptr, nbytes):
        with _lock:
            i = bisect.bisect_right(self.starts, ptr + max(nbytes, 1) - 1) - 1
            return i >= 0 and self.ends[self.starts[i]] > ptr


_device = _Ranges()
_pinned = _Ranges()


def _check_device(ptr, nbytes):
    """IllegalAddress unless [ptr, ptr + nbytes) is live device memory (what a kernel may touch)."""
    if nbytes and not _device.holds(ptr, nbytes):
        raise _illegal(ptr, nbytes)


def _host_kind(ptr, nbytes):
    """'device', 'pinned' or 'pageable' for a pointer argument of a copy."""
    if _device.touches(ptr, nbytes):
        if not _device.holds(ptr, nbytes):
            raise _invalid(f"[{ptr:#x}, +{nbytes}) runs past the end of a device allocation")
        return "device"
    return "pinned" if _pinned.holds(ptr, nbytes) else "pageable"


# ---------------------------------------------------------------- memory

class BaseMemory:
    ptr = 0
    size = 0
    device_id = 0


class Memory(BaseMemory):
    """cudaMalloc'd memory (here: a numpy buffer of garbage), freed when collected."""
    live = 0

    def __init__(self, size):
        size = _index(size, "Memory(size)")
        if size < 0:
            raise ValueError("size must be non-negative")
        self._buf = _garbage(size + 512)
        base = self._buf.ctypes.data
        self.ptr = (base + 511) & ~511
        self.size = size
        self.device_id = 0
        _device.add(self.ptr, self.ptr + size)
        Memory.live += 1

    def __del__(self):
        # cudaFree waits for the device to finish its queued work first.
        try:
            _device_synchronize()
        finally:
            _device.remove(self.ptr)
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


class PinnedMemoryPointer(np.ndarray):
    """What alloc_pinned_memory returns: a writable buffer (here a uint8 numpy
    array of garbage) with ``ptr`` and ``size``."""


def alloc_pinned_memory(size):
    size = _index(size, "size")
    if size < 0:
        raise ValueError("size must be non-negative")
    # The pointer object owns its bytes (not a view), so that numpy views of it
    # (np.frombuffer) keep it, and with it the pinned registration, alive.
    out = PinnedMemoryPointer(size, dtype=np.uint8)
    out[...] = _garbage(size)
    out.ptr = out.ctypes.data if size else 0
    _pinned.add(out.ptr, out.ptr + size)
    weakref.finalize(out, _free_pinned, out.ptr)
    return out


def _free_pinned(ptr):
    # As cudaFreeHost: queued copies from or to the block run first.
    try:
        _device_synchronize()
    finally:
        _pinned.remove(ptr)


# ---------------------------------------------------------------- streams and events

_streams = weakref.WeakValueDictionary()


class Stream:
    """A queue of device work that runs when something waits for it (see the module docstring)."""

    def __init__(self, null=False, non_blocking=False, ptr=0):
        self.ptr = 0 if null else id(self)
        self.non_blocking = bool(non_blocking) and not null
        self._queue = []
        _streams[self.ptr] = self

    def synchronize(self):
        _flush(self)

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
_pending = set()            # streams with queued work (kept alive until it runs, as CUDA does)


def get_current_stream():
    stack = getattr(_local, "streams", None)
    return stack[-1] if stack else Stream.null


def _stream_of(ptr):
    ptr = _index(ptr, "stream")
    s = _streams.get(ptr)
    if s is None:
        raise CUDARuntimeError("cudaErrorInvalidResourceHandle", f"invalid resource handle (stream {ptr:#x})")
    return s


def _flush(stream):
    """Run `stream`'s queued work, in order (the first error clears the queue and is raised)."""
    with _lock:
        queue, stream._queue = stream._queue, []
        _pending.discard(stream)
        for op in queue:
            op()


def _before(stream):
    """Run what must precede new work on `stream`: its own queue and, by the legacy
    default stream's rules, the blocking streams (for the null stream) or the
    null stream (for a blocking one). Non-blocking streams wait for nothing."""
    with _lock:
        if stream is Stream.null:
            for s in list(_streams.values()):
                if s is not Stream.null and not s.non_blocking:
                    _flush(s)
        elif not stream.non_blocking:
            _flush(Stream.null)
        _flush(stream)


def _enqueue(stream, op):
    """Queue `op` on `stream`; it runs when something waits for the stream."""
    with _lock:
        if stream is Stream.null:
            _before(stream)           # legacy stream: after all blocking streams' work
        elif not stream.non_blocking:
            _flush(Stream.null)
        stream._queue.append(op)
        _pending.add(stream)


def _now(stream=None):
    """Run everything that precedes work on `stream` (the current one if None):
    array operations and synchronous copies run at once, after it."""
    _before(stream if stream is not None else get_current_stream())


def _device_synchronize():
    with _lock:
        for s in list(_streams.values()):
            _flush(s)


class Event:
    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self.t = None
        self._stream = None

    def record(self, stream=None):
        s = stream if stream is not None else get_current_stream()
        self._stream = s
        self.t = None

        def stamp():
            self.t = time.perf_counter()

        _enqueue(s, stamp)

    def synchronize(self):
        if self._stream is not None:
            _flush(self._stream)


def get_elapsed_time(start, end):
    if start.t is None or end.t is None:
        raise CUDARuntimeError("cudaErrorNotReady", "device not ready (an event has not completed)")
    return (end.t - start.t) * 1e3


# ---------------------------------------------------------------- arrays

def _view(ptr, shape, dtype):
    dtype = np.dtype(dtype)
    nbytes = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
    if nbytes == 0:
        return np.zeros(shape, dtype)
    raw = (ctypes.c_uint8 * nbytes).from_address(ptr)
    return np.frombuffer(raw, dtype=np.uint8).view(dtype).reshape(shape)


def _unsupported(x):
    return TypeError(f"Unsupported type {type(x)}")


class ndarray:
    """Device array: its bytes are only reachable through live device memory."""

    def __init__(self, shape, dtype=float, memptr=None, strides=None, order="C"):
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        dtype = np.dtype(dtype)
        nbytes = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        if memptr is None:
            memptr = _alloc(nbytes)
        if not isinstance(memptr, MemoryPointer):
            raise TypeError("memptr must be a MemoryPointer")
        self.data = memptr
        self._arr = _view(memptr.ptr, shape, dtype)

    @property
    def _a(self):
        """The bytes, as a numpy view: what a kernel or an array operation touches."""
        a = self._arr
        if a.nbytes:
            _check_device(a.ctypes.data, a.nbytes)
        return a

    @classmethod
    def _wrap(cls, a, mem):
        self = cls.__new__(cls)
        self.data = MemoryPointer(mem, (a.ctypes.data - mem.ptr) if a.nbytes else 0)
        self._arr = a
        return self

    @classmethod
    def _new(cls, values):
        values = np.asarray(values)
        out = cls(values.shape, values.dtype)
        out._a[...] = values
        return out

    shape = property(lambda self: self._arr.shape)
    dtype = property(lambda self: self._arr.dtype)
    nbytes = property(lambda self: self._arr.nbytes)
    size = property(lambda self: self._arr.size)
    ndim = property(lambda self: self._arr.ndim)

    def __array__(self, *args, **kwargs):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. "
                        "Please use `.get()` to construct a NumPy array explicitly.")

    def view(self, dtype):
        return ndarray._wrap(self._arr.view(dtype), self.data.mem)

    def get(self, stream=None):
        _now(stream)
        return self._a.copy()

    def __getitem__(self, key):
        v = self._arr[key]
        if not isinstance(v, np.ndarray):       # a scalar: take the 0-d view instead
            v = self._arr[(key if isinstance(key, tuple) else (key,)) + (Ellipsis,)]
        return ndarray._wrap(v, self.data.mem)

    def __setitem__(self, key, value):
        v = self._other(value)
        _now()
        self._a[key] = v

    @staticmethod
    def _other(o):
        if isinstance(o, ndarray):
            return o._a
        if isinstance(o, (np.generic, int, float, bool, complex)):
            return o
        raise _unsupported(o)

    def _binary(self, o, op):
        v = self._other(o)
        _now()
        return ndarray._new(op(self._a, v))

    def __mul__(self, o):
        return self._binary(o, operator.mul)

    def __add__(self, o):
        return self._binary(o, operator.add)

    __rmul__ = __mul__
    __radd__ = __add__

    def __iadd__(self, o):
        v = self._other(o)
        _now()
        a = self._a
        a += v
        return self

    def sum(self):
        _now()
        return ndarray._new(self._a.sum())

    def __float__(self):
        _now()
        return float(self._a)

    def __int__(self):
        _now()
        return int(self._a)

    def __len__(self):
        return len(self._arr)


def empty(shape, dtype=float):
    return ndarray(shape, dtype)


def zeros(shape, dtype=float):
    out = ndarray(shape, dtype)
    _now()
    out._a[...] = 0
    return out


def full(shape, fill_value, dtype=None):
    out = ndarray(shape, dtype if dtype is not None else np.asarray(fill_value).dtype)
    _now()
    out._a[...] = fill_value
    return out


def arange(n, dtype=None):
    _now()
    return ndarray._new(np.arange(n, dtype=dtype))


def asarray(a, dtype=None):
    if isinstance(a, ndarray):
        return a
    _now()
    return ndarray._new(np.asarray(a, dtype=dtype))


# ---------------------------------------------------------------- runtime

_H2H, _H2D, _D2H, _D2D, _DEFAULT = 0, 1, 2, 3, 4
_WANT = {_H2H: ("host", "host"), _H2D: ("device", "host"), _D2H: ("host", "device"), _D2D: ("device", "device")}
_KIND_NAMES = {_H2H: "cudaMemcpyHostToHost", _H2D: "cudaMemcpyHostToDevice",
               _D2H: "cudaMemcpyDeviceToHost", _D2D: "cudaMemcpyDeviceToDevice"}
_allocs = {}
_pool_attrs = {}


def _rt_malloc(size):
    m = Memory(size)
    _allocs[m.ptr] = m
    return m.ptr


def _rt_free(ptr):
    ptr = _index(ptr, "ptr")
    if ptr == 0:
        return
    if _allocs.pop(ptr, None) is None:
        raise _invalid(f"free of {ptr:#x}, which runtime.malloc did not return or was freed")


def _copy_args(dst, src, size, kind):
    """(dst, src, size, dst kind, src kind), refusing what CUDA refuses."""
    dst, src, size = _index(dst, "dst"), _index(src, "src"), _index(size, "size")
    kind = _index(kind, "kind")
    if kind not in _WANT and kind != _DEFAULT:
        raise CUDARuntimeError("cudaErrorInvalidMemcpyDirection", f"invalid copy direction for memcpy ({kind})")
    if size < 0:
        raise _invalid("negative size")
    dk, sk = _host_kind(dst, size), _host_kind(src, size)
    if size and kind != _DEFAULT:
        want_d, want_s = _WANT[kind]
        for role, got, want, ptr in (("dst", dk, want_d, dst), ("src", sk, want_s, src)):
            if (want == "device") != (got == "device"):
                raise _invalid(f"{_KIND_NAMES[kind]} with a {got} {role} pointer {ptr:#x}; "
                               f"{want} memory is due")
    return dst, src, size, dk, sk


def _memcpy(dst, src, size, kind):
    """cudaMemcpy: synchronous; on the legacy stream, so after the blocking streams' work."""
    dst, src, size, _, _ = _copy_args(dst, src, size, kind)
    _now(Stream.null)
    if size:
        ctypes.memmove(dst, src, size)


def _memcpy_async(dst, src, size, kind, stream):
    dst, src, size, dk, sk = _copy_args(dst, src, size, kind)
    s = _stream_of(stream)
    if not size:
        return
    if dk == "pageable" or (dk != "device" and sk != "device"):
        # To pageable memory, or host to host: complete before returning (CUDA's rule).
        _now(s)
        ctypes.memmove(dst, src, size)
    elif sk == "pageable":
        # From pageable memory: staged (read) before returning, written in stream order.
        staged = ctypes.string_at(src, size)
        _enqueue(s, lambda: ctypes.memmove(dst, staged, size))
    else:
        # Pinned or device on both sides: read and written when the stream runs it.
        def copy():
            if dk == "device":
                _check_device(dst, size)
            if sk == "device":
                _check_device(src, size)
            ctypes.memmove(dst, src, size)

        _enqueue(s, copy)


def _memset_async(ptr, value, size, stream):
    ptr, value, size = _index(ptr, "ptr"), _index(value, "value"), _index(size, "size")
    s = _stream_of(stream)
    if size and not _device.holds(ptr, size):
        raise _invalid(f"memset of [{ptr:#x}, +{size}), which is not device memory")

    def memset():
        _check_device(ptr, size)
        ctypes.memset(ptr, value, size)

    _enqueue(s, memset)


def _free_async(ptr, stream):
    s = _stream_of(stream)
    _enqueue(s, lambda: _rt_free(ptr))


class _PointerAttributes:
    def __init__(self, ptr):
        if _device.holds(ptr, 1):
            self.type = 2
        elif _pinned.holds(ptr, 1):
            self.type = 1
        else:
            self.type = 0               # cudaMemoryTypeUnregistered: pageable host memory
        self.device = 0


runtime = types.SimpleNamespace(
    CUDARuntimeError=CUDARuntimeError,
    getDeviceCount=lambda: 1,
    getDevice=lambda: 0,
    getDeviceProperties=lambda dev: {"name": b"fake GPU (host memory)"},
    runtimeGetVersion=lambda: 12040,
    driverGetVersion=lambda: 12040,
    deviceSynchronize=_device_synchronize,
    malloc=_rt_malloc,
    free=lambda ptr: (_device_synchronize(), _rt_free(ptr)),       # cudaFree synchronises
    mallocAsync=lambda size, stream: (_stream_of(stream), _rt_malloc(size))[1],
    freeAsync=_free_async,
    memcpy=_memcpy,
    memcpyAsync=_memcpy_async,
    memsetAsync=_memset_async,
    deviceGetMemPool=lambda dev: 1,
    memPoolGetAttribute=lambda pool, attr: _pool_attrs.get((pool, attr), 0),
    memPoolSetAttribute=lambda pool, attr, value: _pool_attrs.__setitem__((pool, attr), value),
    cudaMemPoolAttrReleaseThreshold=4,
    cudaMemoryTypeUnregistered=0,
    cudaMemoryTypeHost=1,
    cudaMemoryTypeDevice=2,
    cudaMemoryTypeManaged=3,
    pointerGetAttributes=lambda ptr: _PointerAttributes(_index(ptr, "ptr")),
)


# ---------------------------------------------------------------- kernels

def _u64(ptr):
    return ctypes.c_uint64.from_address(ptr)


def _push(hdr, nbytes):
    _check_device(hdr, 16)
    n = (nbytes + 15) & ~15
    used = _u64(hdr)
    off = used.value
    used.value = off + n
    cap = _u64(hdr + 8).value
    if off > cap or n > cap - off:
        return 0
    _check_device(hdr + 256 + off, n)
    return hdr + 256 + off


def _write_hit(p, i, s, x, y):
    _check_device(p, 16)
    ctypes.c_int32.from_address(p).value = int(i)
    ctypes.c_float.from_address(p + 4).value = float(s)
    ctypes.c_float.from_address(p + 8).value = float(x)
    ctypes.c_float.from_address(p + 12).value = float(y)


def _threads(n):
    order = list(range(n))
    random.shuffle(order)
    return order


def _k_threshold_arena(score, x, y, n, thr, hits):
    score, x, y = score._a, x._a, y._a
    for i in _threads(n):
        if score[i] > np.float32(thr):
            p = _push(hits, 16)
            if p:
                _write_hit(p, i, score[i], x[i], y[i])


def _k_threshold_counter(score, x, y, n, thr, count, out):
    score, x, y, c = score._a, x._a, y._a, count._a
    base = out.data.ptr
    for i in _threads(n):
        if score[i] > np.float32(thr):
            k = int(c[0])
            c[0] = k + 1
            if k < n:
                _write_hit(base + 16 * k, i, score[i], x[i], y[i])


def _k_empty(n, sink):
    sink._a


def _k_alloc_arena(n, nbytes, a, sink):
    s = sink._a
    for i in _threads(n):
        p = _push(a, nbytes)
        if not p:
            s[0] += 1
        else:
            ctypes.c_uint8.from_address(p).value = i & 0xFF


def _k_alloc_malloc(n, nbytes, sink):
    sink._a
    for _ in range(n):
        bytearray(nbytes)


def _k_push_tagged(n, a, failed):
    f = failed._a
    for i in _threads(n):
        p = _push(a, 16)
        if not p:
            f[0] += 1
            continue
        rec = (ctypes.c_uint32 * 4).from_address(p)
        rec[0], rec[1], rec[2], rec[3] = i, (~i) & 0xFFFFFFFF, 16, 0


# The kernels of dod.cuda.kernels, by name: nothing else can be "compiled".
_KERNELS = {
    "dod_threshold_arena": _k_threshold_arena,
    "dod_threshold_counter": _k_threshold_counter,
    "dod_empty": _k_empty,
    "dod_alloc_arena": _k_alloc_arena,
    "dod_alloc_malloc": _k_alloc_malloc,
    "dod_push_tagged": _k_push_tagged,
}


def _arg(a):
    if isinstance(a, ndarray):
        # What the kernel gets is the address, not the array object: a queued
        # launch keeps nothing alive (as on a GPU), and touching memory freed
        # before it runs is an illegal address.
        return ndarray._wrap(a._arr, UnownedMemory(a.data.ptr, a.nbytes, None))
    if isinstance(a, (np.generic, int, float, bool)):
        return a.item() if isinstance(a, np.generic) else a
    raise _unsupported(a)


# C parameter types of the kernels, as numpy dtypes (CuPy passes a numpy
# scalar by its dtype, and Python int/float/bool as long long/double/bool).
_C_TYPES = {"int": np.int32, "unsigned int": np.uint32, "float": np.float32, "double": np.float64,
            "long long": np.int64, "unsigned long long": np.uint64, "char": np.int8,
            "unsigned char": np.uint8, "bool": np.bool_}
_PY_SCALARS = {int: np.int64, float: np.float64, bool: np.bool_}


def _signature(params):
    """[(C type, pointer?, numpy dtype or None, name)] of a kernel's parameter list."""
    out = []
    for p in (x.strip() for x in params.split(",")):
        if not p:
            continue
        pointer = "*" in p
        words = p.replace("*", " ").replace("const", " ").split()
        ctype, name = " ".join(words[:-1]), words[-1]
        out.append((ctype, pointer, _C_TYPES.get(ctype), name))
    return out


def _check_args(name, signature, args):
    """TypeError where a GPU would silently misread an argument (CuPy does not
    check): wrong count, a scalar of another size or kind, an array whose dtype
    is not the pointer's element type, a pointer passed as a 4-byte integer."""
    if len(args) != len(signature):
        raise TypeError(f"kernel {name} takes {len(signature)} arguments, got {len(args)}")
    for i, (a, (ctype, pointer, dt, pname)) in enumerate(zip(args, signature)):
        what = f"kernel {name} argument {i} ({ctype}{'*' if pointer else ''} {pname})"
        if pointer:
            if isinstance(a, ndarray):
                if dt is not None and a.dtype != np.dtype(dt):
                    raise TypeError(f"{what}: an array of {a.dtype}, not {np.dtype(dt)}")
                continue
            kind = np.dtype(_PY_SCALARS.get(type(a))) if not isinstance(a, np.generic) else a.dtype
            if kind.kind not in "iu" or kind.itemsize != 8:
                raise TypeError(f"{what}: a pointer is an array or an 8-byte integer address, got {kind}")
            continue
        if isinstance(a, ndarray):
            raise TypeError(f"{what}: an array where a scalar is due")
        kind = a.dtype if isinstance(a, np.generic) else np.dtype(_PY_SCALARS[type(a)])
        if kind != np.dtype(dt):
            raise TypeError(f"{what}: got {kind} (Python int/float pass as long long/double); "
                            f"give numpy.{np.dtype(dt).name}")


class RawKernel:
    def __init__(self, name, signature):
        self.name = name
        self.signature = signature

    def __call__(self, grid, block, args, *, shared_mem=0):
        if not (isinstance(grid, tuple) and isinstance(block, tuple)):
            raise TypeError("grid and block must be tuples")
        if not isinstance(args, tuple):
            raise TypeError("args must be a tuple")
        for a in args:
            if not isinstance(a, (ndarray, np.generic, int, float, bool)):
                raise _unsupported(a)
        _check_args(self.name, self.signature, args)
        args = [_arg(a) for a in args]
        threads = int(np.prod(grid)) * int(np.prod(block))
        n = args[0] if self.name not in ("dod_threshold_arena", "dod_threshold_counter") else args[3]
        if threads < n:
            raise AssertionError(f"launch of {threads} threads for n = {n}")
        _enqueue(get_current_stream(), lambda: _KERNELS[self.name](*args))


class RawModule:
    """Lists the kernels of a source; only dod.cuda's own kernels can be fetched
    (re-implemented above): the stand-in cannot compile CUDA C."""

    def __init__(self, code=None, *, backend="nvrtc", options=(), **kwargs):
        self.signatures = {m.group(1): _signature(m.group(2)) for m in
                           re.finditer(r'extern "C" __global__ void (\w+)\(([^)]*)\)', code)}

    def get_function(self, name):
        if name not in self.signatures:
            raise RuntimeError(f"CUDA_ERROR_NOT_FOUND: named symbol not found: {name}")
        if name not in _KERNELS:
            raise NotImplementedError(f"the CuPy stand-in cannot compile kernel {name!r}: "
                                      "it knows only dod.cuda's own kernels")
        return RawKernel(name, self.signatures[name])


cuda = types.SimpleNamespace(
    Memory=Memory, UnownedMemory=UnownedMemory, MemoryPointer=MemoryPointer, BaseMemory=BaseMemory,
    MemoryAsyncPool=MemoryAsyncPool, alloc_pinned_memory=alloc_pinned_memory,
    PinnedMemoryPointer=PinnedMemoryPointer,
    using_allocator=_using_allocator, Stream=Stream, Event=Event, get_elapsed_time=get_elapsed_time,
    get_current_stream=get_current_stream, runtime=runtime,
)
