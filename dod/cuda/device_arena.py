"""Device arena: one device allocation, carved by the host and pushed into by kernels.

.. not run: a picture of the allocation's layout, not code

Layout of the one ``cudaMalloc`` (made once, freed when the arena and every
array carved from it are gone)::

    [ header: HEADER_BYTES ][ push region: push_capacity ][ carve region: capacity ]
      used, capacity          kernels: dod_gpu_arena_push   host: empty/zeros/upload/scope

- The carve region is a bump arena run entirely on the host: carving an
  array is arithmetic on an offset plus a CuPy array object over the memory
  (no CUDA call). Its lifetime rules are those of :class:`dod.arena.Arena`:
  arrays keep the arena alive, and a reset or rewind under a live array raises
  BufferError unless ``unchecked=True``.
- The push region belongs to kernels. The header in device memory holds
  ``used``; a kernel pushes with one ``atomicAdd`` on it
  (``dod_gpu_arena_push``, CUDA source in :mod:`dod.cuda.kernels`). Reset is
  ZII: :meth:`DeviceArena.reset_pushes` is one 8-byte ``cudaMemsetAsync`` of
  ``used`` on the stream; no kernel, no host round trip. ``used`` keeps
  counting past the end, so exhaustion inside a kernel is visible afterwards
  (:meth:`DeviceArena.pushed`, :meth:`DeviceArena.overflowed`) and a push
  that does not fit returns 0 instead of writing outside the region.

The two regions are separate so that neither side needs the other's position:
the host never reads ``used`` to carve, and kernels never see the host's
offset. Size the push region for the most a kernel may push (``n`` hits of
``n`` detections, say).

Stream order
    Everything the arena enqueues (memsets, copies) goes on its stream (the
    one given at construction, else the current CuPy stream at each call).
    Memory released by a rewind or reset is handed out again to work that is
    enqueued later: on one stream that is safe, as with CuPy's own pool; work
    on other streams must be ordered by the caller (events).

Thread-safety
    One host thread at a time, as :class:`dod.arena.Arena`; kernels may push
    concurrently from any number of device threads.
"""
import warnings
import weakref

import numpy as np

from dod.cuda import require_device
from dod.errors import EscapeWarning  # noqa: F401  (re-exported as dod.cuda.EscapeWarning)
from dod.cuda._bump import Bump, array_request, check_align, check_capacity
from dod.cuda.kernels import HEADER_BYTES, PUSH_GRANULE

_H2D = 1                # cudaMemcpyHostToDevice (a fixed CUDA enum value)
_D2H = 2                # cudaMemcpyDeviceToHost
_CARVE_ALIGN = 256      # default alignment of carved arrays (what cudaMalloc gives)
_MAX_ALIGN = 256        # the carve region starts 256-aligned: more cannot be promised


def _round_up(n, a):
    return (n + a - 1) & ~(a - 1)


def record_dtype(dtype):
    """`dtype` as a numpy dtype for pushed records: plain, and a multiple of
    PUSH_GRANULE bytes so that records lie back to back; else ValueError."""
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"not a dtype: {dtype!r} ({e})") from None
    if dt.hasobject or dt.itemsize == 0 or dt.itemsize % PUSH_GRANULE:
        raise ValueError(f"pushed records need a plain dtype whose size is a multiple of "
                         f"{PUSH_GRANULE} bytes; {dt} has {dt.itemsize}")
    return dt


def read_pushes(buffer, dtype, push_capacity):
    """(records, asked) from a host copy of a device arena's header and push
    region (what :meth:`DeviceArena.download_pushes` writes): the records of
    `dtype` that fit (a numpy view of `buffer`) and the bytes kernels asked
    for (above `push_capacity` when they overflowed). Records beyond the end
    of `buffer` are left out."""
    dt = record_dtype(dtype)
    if not isinstance(buffer, np.ndarray) or not buffer.flags.c_contiguous:
        raise TypeError("read_pushes() needs a C-contiguous numpy array")
    raw = buffer.reshape(-1).view(np.uint8)
    if raw.nbytes < HEADER_BYTES:
        raise ValueError(f"buffer holds {raw.nbytes} bytes, less than the {HEADER_BYTES}-byte header")
    asked = int(raw[:8].view(np.uint64)[0])
    room = min(push_capacity, raw.nbytes - HEADER_BYTES)
    count = min(asked, room) // dt.itemsize
    return raw[HEADER_BYTES:HEADER_BYTES + count * dt.itemsize].view(dt), asked


class DeviceMark:
    """A position in a :class:`DeviceArena`'s carve region, from :meth:`DeviceArena.mark`.

    Parameters
    ----------
    arena : DeviceArena
        The arena it belongs to.
    position : int
        Bytes carved when it was taken.

    Notes
    -----
    Thread-safety: a plain value.
    """

    __slots__ = ("arena", "position")

    def __init__(self, arena, position):
        self.arena = arena
        self.position = position

    def __repr__(self):
        return f"<dod.cuda.DeviceMark position={self.position}>"


class _PushLease:
    """Owner of a CuPy view of the push region (see :meth:`DeviceArena.push_region`)."""

    __slots__ = ("owner", "__weakref__")

    def __init__(self, owner):
        self.owner = owner


class DeviceArena:
    """DeviceArena(capacity, *, push_capacity=0, stream=None)

    A bump arena in device memory, for the host and for kernels.

    Parameters
    ----------
    capacity : int
        Bytes of the carve region (host-carved CuPy arrays, :meth:`scope`).
        May be 0 when only kernels push.
    push_capacity : int
        Bytes of the push region kernels push into (rounded up to 256).
    stream : cupy.cuda.Stream, optional
        Where the arena enqueues its memsets and copies; the current CuPy
        stream at each call when None.

    Raises
    ------
    TypeError, ValueError
        For bad sizes (before any CUDA call).
    ImportError
        Without CuPy.
    RuntimeError
        Without a device.
    cupy.cuda.memory.OutOfMemoryError
        When the device refuses the memory.

    Notes
    -----
    One ``cudaMalloc`` of 256 + push_capacity + capacity bytes (rounded) on
    the current device, made here. Thread-safety: one host thread at a
    time, as :class:`dod.arena.Arena`; kernels may push concurrently from
    any number of device threads.
    """

    def __init__(self, capacity, *, push_capacity=0, stream=None):
        capacity = check_capacity(capacity, allow_zero=True)
        push_capacity = check_capacity(push_capacity, "push_capacity", allow_zero=True)
        if capacity == 0 and push_capacity == 0:
            raise ValueError("a device arena needs capacity > 0 or push_capacity > 0")
        cp = require_device()
        self._cp = cp
        self._stream = stream
        self._push_capacity = _round_up(push_capacity, HEADER_BYTES)
        self._mem = cp.cuda.Memory(HEADER_BYTES + self._push_capacity + capacity)
        self.device_id = self._mem.device_id
        self._base = int(self._mem.ptr)
        self._carve_base = self._base + HEADER_BYTES + self._push_capacity
        self._bump = Bump(capacity)
        self._push_views = weakref.WeakSet()
        # The header, written once and synchronously: used = 0, capacity = push region.
        header = np.zeros(HEADER_BYTES // 8, dtype=np.uint64)
        header[1] = self._push_capacity
        cp.cuda.runtime.memcpy(self._base, header.ctypes.data, HEADER_BYTES, _H2D)
        # cudaMemcpy from pageable memory may return before the DMA lands; work
        # on a non-blocking stream is not ordered after it. Wait, once.
        cp.cuda.runtime.deviceSynchronize()
        self._readback = np.zeros(1, dtype=np.uint64)

    # -------------------------------------------------------- streams

    @property
    def stream(self):
        """The stream the arena's own work goes on (the current CuPy stream if none was given)."""
        return self._stream if self._stream is not None else self._cp.cuda.get_current_stream()

    def _stream_ptr(self, stream):
        return int((stream if stream is not None else self.stream).ptr)

    # -------------------------------------------------------- carving (host side)

    def _memptr(self, nbytes, align):
        offset, lease = self._bump.push(nbytes, align, self)
        cuda = self._cp.cuda
        mem = cuda.UnownedMemory(self._carve_base + offset, nbytes, lease, self.device_id)
        return cuda.MemoryPointer(mem, 0)

    def empty(self, shape, dtype=float, *, align=None):
        """A new uninitialised CuPy array carved from the carve region. No CUDA call is made.

        Parameters
        ----------
        shape : int or tuple of int
        dtype : numpy dtype, default float
        align : int, optional
            A power of two up to 256 (default 256).

        Returns
        -------
        cupy.ndarray

        Raises
        ------
        MemoryError
            When the region is exhausted.
        TypeError
            For object or unsized dtypes.
        ValueError
            For negative dimensions or a bad alignment.

        Notes
        -----
        A failed call changes nothing but the ``failed`` counter. Thread-safety: one host thread at a time (kernels may push concurrently from any number of device threads).
        """
        dims, dt, nbytes = array_request(shape, dtype)
        a = check_align(align, max(_CARVE_ALIGN, dt.alignment), _MAX_ALIGN)
        return self._cp.ndarray(dims, dtype=dt, memptr=self._memptr(nbytes, a))

    def zeros(self, shape, dtype=float, *, align=None, stream=None):
        """As :meth:`empty`, zeroed by a ``cudaMemsetAsync`` on the stream.

        Parameters
        ----------
        shape : int or tuple of int
        dtype : numpy dtype, default float
        align : int, optional
        stream : cupy.cuda.Stream, optional
            Default: the arena's :attr:`stream`.

        Returns
        -------
        cupy.ndarray

        Raises
        ------
        MemoryError, TypeError, ValueError
            As :meth:`empty`.

        Notes
        -----
        Thread-safety: one host thread at a time (kernels may push concurrently from any number of device threads).
        """
        arr = self.empty(shape, dtype, align=align)
        if arr.nbytes:
            self._cp.cuda.runtime.memsetAsync(arr.data.ptr, 0, arr.nbytes, self._stream_ptr(stream))
        return arr

    def upload(self, host, *, stream=None, align=None):
        """A device copy of numpy array `host`, carved here; the copy is a ``cudaMemcpyAsync`` on the stream.

        Parameters
        ----------
        host : numpy.ndarray
            Asynchronous for page-locked `host` (a :class:`~dod.cuda.PinnedArena`
            array): the caller keeps it alive and unchanged until the stream has
            run the copy (the frame's one sync). Pageable memory is staged by CUDA
            before this returns. Non-contiguous input is copied to a contiguous
            temporary first (pageable, so that is safe).
        stream : cupy.cuda.Stream, optional
            Default: the arena's :attr:`stream`.
        align : int, optional

        Returns
        -------
        cupy.ndarray

        Raises
        ------
        TypeError
            For anything but a numpy array.
        MemoryError, ValueError
            As :meth:`empty`.

        Notes
        -----
        Thread-safety: one host thread at a time (kernels may push concurrently from any number of device threads).
        """
        if not isinstance(host, np.ndarray):
            raise TypeError(f"upload() takes a numpy array, got {type(host).__name__}")
        if not host.flags.c_contiguous:
            host = np.ascontiguousarray(host)
        arr = self.empty(host.shape, host.dtype, align=align)
        if host.nbytes:
            self._cp.cuda.runtime.memcpyAsync(arr.data.ptr, host.ctypes.data, host.nbytes, _H2D,
                                              self._stream_ptr(stream))
        return arr

    def mark(self):
        """The carve region's current position, to :meth:`rewind` to later.

        Returns
        -------
        DeviceMark

        Notes
        -----
        Thread-safety: one host thread at a time (kernels may push concurrently from any number of device threads).
        """
        return DeviceMark(self, self._bump.used)

    def rewind(self, mark, *, unchecked=False):
        """Release everything carved after `mark`.

        Parameters
        ----------
        mark : DeviceMark
            From :meth:`mark` on this arena.
        unchecked : bool, default False
            Rewind even while arrays carved after the mark are alive.

        Raises
        ------
        TypeError
            For anything but a DeviceMark.
        ValueError
            For a mark of another arena or one beyond the current position.
        BufferError
            While an array carved after it is alive (unless ``unchecked``).

        Notes
        -----
        Nothing changes when it raises. Thread-safety: one host thread at a time (kernels may push concurrently from any number of device threads).
        """
        if not isinstance(mark, DeviceMark):
            raise TypeError(f"rewind() takes a DeviceMark from mark(), got {type(mark).__name__}")
        if mark.arena is not self:
            raise ValueError("that mark belongs to another arena")
        self._bump.release_to(mark.position, unchecked)

    def scope(self):
        """``with arena.scope() as s:`` routes CuPy's own allocations to this arena.

        Returns
        -------
        AllocatorScope

        Notes
        -----
        Thread-safety: one host thread at a time (kernels may push concurrently from any number of device threads). See :class:`AllocatorScope`.
        """
        return AllocatorScope(self)

    # -------------------------------------------------------- pushes (device side)

    @property
    def header(self):
        """Device address of the header, as ``numpy.uint64``: pass it to a kernel
        as its ``dod_gpu_arena*`` argument."""
        return np.uint64(self._base)

    def reset_pushes(self, *, stream=None, unchecked=False):
        """Forget every push: one 8-byte ``cudaMemsetAsync`` of ``used`` on the stream.

        Parameters
        ----------
        stream : cupy.cuda.Stream, optional
            Default: the arena's :attr:`stream`.
        unchecked : bool, default False
            Reset even while a view from :meth:`push_region` is alive.

        Raises
        ------
        BufferError
            While a view from :meth:`push_region` is alive (nothing enqueued),
            unless ``unchecked``.

        Notes
        -----
        Thread-safety: one host thread at a time (kernels may push concurrently from any number of device threads).
        """
        if not unchecked and len(self._push_views):
            raise BufferError("views of the push region (from push_region()) are still alive; delete them "
                              "first, or pass unchecked=True if you own the risk")
        self._cp.cuda.runtime.memsetAsync(self._base, 0, 8, self._stream_ptr(stream))

    def reset(self, *, stream=None, unchecked=False):
        """Release all carved arrays and forget every push (one 8-byte memset).

        Parameters
        ----------
        stream : cupy.cuda.Stream, optional
            Default: the arena's :attr:`stream`.
        unchecked : bool, default False
            Reset even while arrays or push-region views are alive.

        Raises
        ------
        BufferError
            While a carved array or a push_region() view is alive (no change),
            unless ``unchecked``.

        Notes
        -----
        Thread-safety: one host thread at a time (kernels may push concurrently from any number of device threads).
        """
        if not unchecked:
            pinned = self._bump.pinned_above(0)
            if pinned:
                self._bump.release_to(0, False)     # raises the BufferError with the details
            if len(self._push_views):
                raise BufferError("views of the push region (from push_region()) are still alive")
        self.reset_pushes(stream=stream, unchecked=True)
        self._bump.release_to(0, True)

    def pushed(self, *, stream=None):
        """Bytes kernels asked for since the last reset, failed pushes included.

        Synchronises the stream and reads the header (a small blocking copy): for
        tests and diagnostics. The frame reads it asynchronously with
        :meth:`download_pushes`.

        Parameters
        ----------
        stream : cupy.cuda.Stream, optional
            Default: the arena's :attr:`stream`.

        Returns
        -------
        int

        Notes
        -----
        Thread-safety: one host thread at a time (kernels may push concurrently from any number of device threads).
        """
        s = stream if stream is not None else self.stream
        s.synchronize()
        self._cp.cuda.runtime.memcpy(self._readback.ctypes.data, self._base, 8, _D2H)
        return int(self._readback[0])

    def overflowed(self, *, stream=None):
        """Whether kernels asked for more than the push region holds (synchronises).

        Parameters
        ----------
        stream : cupy.cuda.Stream, optional
            Default: the arena's :attr:`stream`.

        Returns
        -------
        bool

        Notes
        -----
        Thread-safety: one host thread at a time (kernels may push concurrently from any number of device threads).
        """
        return self.pushed(stream=stream) > self._push_capacity

    def pushes(self, dtype, *, stream=None):
        """The pushed records, copied to the host (synchronises; for tests and diagnostics).

        Only records that fit the push region are included.

        Parameters
        ----------
        dtype : numpy dtype
            Its size must be a multiple of 16 (PUSH_GRANULE), so that records lie
            back to back; structured dtypes are fine (the copy is a plain numpy
            array, which CuPy arrays of structured dtypes are not reliably).
        stream : cupy.cuda.Stream, optional
            Default: the arena's :attr:`stream`.

        Returns
        -------
        numpy.ndarray

        Raises
        ------
        TypeError
            For something that is not a dtype.
        ValueError
            For a dtype whose size is not a multiple of 16.

        Notes
        -----
        Thread-safety: one host thread at a time (kernels may push concurrently from any number of device threads).
        """
        dt = record_dtype(dtype)
        count = min(self.pushed(stream=stream), self._push_capacity) // dt.itemsize
        out = np.empty(count, dtype=dt)
        if count:
            self._cp.cuda.runtime.memcpy(out.ctypes.data, self._base + HEADER_BYTES, out.nbytes, _D2H)
        return out

    def push_region(self, *, stream=None):
        """The pushed bytes as a CuPy ``uint8`` array over the push region (no copy).

        Synchronises to read ``used``. ``.view(dtype)`` it for plain dtypes.

        Parameters
        ----------
        stream : cupy.cuda.Stream, optional
            Default: the arena's :attr:`stream`.

        Returns
        -------
        cupy.ndarray
            It keeps the arena alive and blocks a checked :meth:`reset_pushes` or
            :meth:`reset` while it lives.

        Notes
        -----
        Thread-safety: one host thread at a time (kernels may push concurrently from any number of device threads).
        """
        nbytes = min(self.pushed(stream=stream), self._push_capacity)
        lease = _PushLease(self)
        self._push_views.add(lease)
        cuda = self._cp.cuda
        mem = cuda.UnownedMemory(self._base + HEADER_BYTES, nbytes, lease, self.device_id)
        return self._cp.ndarray((nbytes,), dtype=np.uint8, memptr=cuda.MemoryPointer(mem, 0))

    def download_pushes(self, out, *, stream=None):
        """Enqueue one async copy of the header and the push region into `out`.

        ``min(out.nbytes, HEADER_BYTES + push_capacity)`` bytes are copied. After
        the stream is synchronised, :meth:`pushes_from` reads the records out of
        `out`.

        Parameters
        ----------
        out : numpy.ndarray
            Writable and C-contiguous (page-locked, e.g. from a
            :class:`~dod.cuda.PinnedArena`, for the copy to be asynchronous), of at
            least HEADER_BYTES bytes.
        stream : cupy.cuda.Stream, optional
            Default: the arena's :attr:`stream`.

        Raises
        ------
        TypeError
            For anything but a writable C-contiguous numpy array.
        ValueError
            For fewer than HEADER_BYTES bytes.

        Notes
        -----
        Thread-safety: one host thread at a time (kernels may push concurrently from any number of device threads).
        """
        if not isinstance(out, np.ndarray) or not out.flags.c_contiguous or not out.flags.writeable:
            raise TypeError("download_pushes() needs a writable C-contiguous numpy array")
        if out.nbytes < HEADER_BYTES:
            raise ValueError(f"out holds {out.nbytes} bytes; it needs at least {HEADER_BYTES} for the header")
        n = min(out.nbytes, HEADER_BYTES + self._push_capacity)
        self._cp.cuda.runtime.memcpyAsync(out.ctypes.data, self._base, n, _D2H, self._stream_ptr(stream))

    def pushes_from(self, out, dtype):
        """The records in a buffer filled by :meth:`download_pushes`. No CUDA call: synchronise the stream first.

        Parameters
        ----------
        out : numpy.ndarray
            The buffer given to :meth:`download_pushes`.
        dtype : numpy dtype
            As for :meth:`pushes`.

        Returns
        -------
        tuple
            ``(records, asked)``: the records of `dtype` (a numpy view of `out`),
            and the bytes asked for (more than ``push_capacity`` when the region
            overflowed).

        Notes
        -----
        Thread-safety: one host thread at a time (kernels may push concurrently from any number of device threads).
        """
        return read_pushes(out, dtype, self._push_capacity)

    # -------------------------------------------------------- statistics

    @property
    def capacity(self):
        """Bytes of the carve region."""
        return self._bump.capacity

    @property
    def push_capacity(self):
        """Bytes of the push region (a multiple of 256)."""
        return self._push_capacity

    @property
    def used(self):
        """Carve position: bytes carved, alignment padding included."""
        return self._bump.used

    @property
    def available(self):
        """Bytes of the carve region not yet carved (before padding)."""
        return self._bump.capacity - self._bump.used

    @property
    def peak(self):
        """Highest carve position reached."""
        return self._bump.peak

    @property
    def allocations(self):
        """Successful carves since creation (scope allocations included)."""
        return self._bump.allocations

    @property
    def failed(self):
        """Carves that did not fit."""
        return self._bump.failed

    @property
    def pinned(self):
        """Lowest position a checked rewind can reach now (live arrays sit below it)."""
        return self._bump.pinned_above(0)

    @property
    def ptr(self):
        """Device address of the allocation (the header comes first)."""
        return self._base

    @property
    def nbytes(self):
        """Bytes of the one device allocation."""
        return HEADER_BYTES + self._push_capacity + self._bump.capacity

    def stats(self):
        """The common statistics as a dict (carve region; push_capacity beside).

        Returns
        -------
        dict

        Notes
        -----
        Thread-safety: one host thread at a time (kernels may push concurrently from any number of device threads).
        """
        return {
            "capacity": self.capacity,
            "used": self.used,
            "available": self.available,
            "peak": self.peak,
            "allocations": self.allocations,
            "failed": self.failed,
            "push_capacity": self.push_capacity,
        }

    def __repr__(self):
        return (f"<dod.cuda.DeviceArena device={self.device_id} capacity={self.capacity} "
                f"used={self.used} peak={self.peak} allocations={self.allocations} "
                f"failed={self.failed} push_capacity={self.push_capacity} pinned={self.pinned}>")


class AllocatorScope:
    """Routes CuPy's own allocations to a :class:`DeviceArena` for a ``with`` block.

    On enter it marks the carve region and installs itself as CuPy's
    (thread-local) allocator with ``cupy.cuda.using_allocator``; every CuPy
    allocation in the block (``cp.empty``, results of operations...) is
    carved from the arena, 256-aligned. On exit it restores the previous
    allocator and rewinds to the mark.

    Escape rule: arrays still alive at exit keep their memory valid. The rewind
    stops at the end of the highest live one (the arena is a stack: everything
    above it is dead), and the escapes are reported: :attr:`escaped` lists
    ``(offset, nbytes)`` of each, and an :class:`EscapeWarning` is issued on a
    normal exit. The memory they hold (and any dead memory below it) returns
    at a later rewind or reset once they are gone.

    Inside the block nothing is reused (a bump never frees piece by piece):
    size the arena for everything the block allocates, temporaries included.
    MemoryError from CuPy's operations in the block when the arena is
    exhausted. Use the scope on one thread and, for memory reuse across
    scopes to be safe without events, one stream (as with CuPy's pool).
    """

    def __init__(self, arena, align=_CARVE_ALIGN):
        self.arena = arena
        self.align = align
        self.allocations = 0        # CuPy allocations served in this scope
        self.bytes = 0              # bytes requested by them
        self.escaped = []           # (offset, nbytes) of arrays alive at exit
        self._entered = False
        self._cm = None

    def _malloc(self, size):
        mp = self.arena._memptr(size, self.align)
        self.allocations += 1
        self.bytes += size
        return mp

    def __enter__(self):
        if self._entered:
            raise RuntimeError("an allocator scope can be entered once")
        self._entered = True
        self._mark = self.arena._bump.used
        cm = self.arena._cp.cuda.using_allocator(self._malloc)
        cm.__enter__()
        self._cm = cm
        return self

    def __exit__(self, exc_type, exc, tb):
        self._cm.__exit__(exc_type, exc, tb)
        bump = self.arena._bump
        if bump.used < self._mark:
            return False            # an unchecked rewind inside went below the scope
        live = bump.live_above(self._mark)
        self.escaped = [(lease.start, lease.end - lease.start) for lease in live]
        top = max([self._mark] + [lease.end for lease in live])
        bump.release_to(min(top, bump.used), True)
        if live and exc_type is None:
            total = sum(n for _, n in self.escaped)
            warnings.warn(
                f"{len(live)} CuPy array(s) ({total} bytes) allocated in a DeviceArena scope are still "
                f"alive at its exit; their memory stays valid (the arena rewound only to offset "
                f"{bump.used}) and returns at a later reset once they are gone",
                EscapeWarning, stacklevel=2)
        return False

    def __repr__(self):
        return (f"<dod.cuda.AllocatorScope allocations={self.allocations} bytes={self.bytes} "
                f"escaped={len(self.escaped)}>")
