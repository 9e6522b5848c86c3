"""Host-side bookkeeping of a bump region addressed by offsets (no memory, no CUDA).

The device arena's carve region lives on the GPU, where the host cannot (and
need not) touch it: carving is arithmetic on offsets. This module is that
arithmetic and the lifetime rules of :mod:`dod.arena`, in plain Python so
that it is tested everywhere, GPU or not.

Invariants (``check()`` verifies them):
- 0 <= used <= capacity; peak >= used (peak is folded in at rewind).
- Every live lease [start, end) lies inside [0, used): a rewind never goes
  below a live lease unless the caller said ``unchecked``.
- Offsets handed out are multiples of the requested alignment.
"""
import operator
import weakref

import numpy as np

MAX_CAPACITY = 1 << 48          # as dod.arena: a larger request is refused as absurd


class Lease:
    """Keeps a carved piece's arena alive and records the offsets [start, end)
    the piece occupies; a live lease blocks a checked rewind below its end.
    CuPy holds it as the owner of the piece's ``UnownedMemory``."""

    __slots__ = ("owner", "start", "end", "__weakref__")

    def __init__(self, owner, start, end):
        self.owner = owner
        self.start = start
        self.end = end

    def __repr__(self):
        return f"<dod.cuda lease [{self.start}, {self.end})>"


def check_capacity(value, name="capacity", allow_zero=False):
    """`value` as a size in bytes, or TypeError/ValueError."""
    try:
        n = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer number of bytes, got {value!r}") from None
    if n < 0 or (n == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'non-negative' if allow_zero else 'positive'}, got {value!r}")
    if n > MAX_CAPACITY:
        raise ValueError(f"{name} {value!r} is absurd (more than 2**48 bytes)")
    return n


def check_align(align, default, limit):
    """A power of two in [1, limit] (default when None), or ValueError/TypeError."""
    if align is None:
        return default
    try:
        a = operator.index(align)
    except TypeError:
        raise TypeError(f"align must be an integer, got {align!r}") from None
    if a <= 0 or a & (a - 1):
        raise ValueError(f"align must be a power of two, got {align!r}")
    if a > limit:
        raise ValueError(f"align {a} is above the {limit} bytes this arena can guarantee")
    return a


def array_request(shape, dtype):
    """(shape tuple, numpy dtype, nbytes) for an array request, validated as
    ``dod.arena`` does: no object or unsized dtypes, no negative dimensions."""
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"not a dtype: {dtype!r} ({e})") from None
    if dt.hasobject:
        raise TypeError(f"dtype {dt} holds Python objects; arenas carve plain memory only")
    if dt.itemsize == 0:
        raise TypeError(f"dtype {dt} has no size; give a sized dtype (e.g. 'S8', 'U4')")
    try:
        dims = (operator.index(shape),)
    except TypeError:
        try:
            dims = tuple(operator.index(d) for d in shape)
        except TypeError:
            raise TypeError(f"shape must be an int or a sequence of ints, got {shape!r}") from None
    for d in dims:
        if d < 0:
            raise ValueError(f"negative dimensions are not allowed: {shape!r}")
    nbytes = dt.itemsize
    for d in dims:
        nbytes *= d
    return dims, dt, nbytes


class Bump:
    """Offsets [0, capacity) handed out by a bump, with leases and statistics."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.used = 0
        self._peak = 0
        self.allocations = 0
        self.failed = 0
        self._leases = weakref.WeakSet()

    def push(self, nbytes, align, owner):
        """(offset, lease) for `nbytes` at `align`; MemoryError (state unchanged
        but for ``failed``) when it does not fit."""
        start = (self.used + align - 1) & ~(align - 1)
        if start > self.capacity or nbytes > self.capacity - start:
            self.failed += 1
            raise MemoryError(
                f"device arena exhausted: {nbytes} bytes (alignment {align}) requested, "
                f"{self.capacity - self.used} available of {self.capacity}")
        lease = Lease(owner, start, start + nbytes)
        self._leases.add(lease)
        self.used = start + nbytes
        self.allocations += 1
        return start, lease

    @property
    def peak(self):
        return max(self._peak, self.used)

    def pinned_above(self, position):
        """Highest end of a live lease above `position` (0 when none)."""
        top = 0
        for lease in list(self._leases):
            if lease.end > position and lease.end > top:
                top = lease.end
        return top

    def live_above(self, position):
        """Live leases that end above `position`, lowest first."""
        return sorted((l for l in list(self._leases) if l.end > position), key=lambda l: l.start)

    def release_to(self, position, unchecked):
        """Rewind to `position`; BufferError (no change) under a live lease unless unchecked."""
        if position > self.used:
            raise ValueError(f"position {position} is beyond the current position {self.used} "
                             "(taken before a rewind or reset)")
        if not unchecked:
            pinned = self.pinned_above(position)
            if pinned:
                raise BufferError(
                    f"arrays carved from this arena are still alive up to offset {pinned}, "
                    f"above the requested {position}; delete them first, or pass "
                    "unchecked=True if you own the risk of aliasing")
        self._peak = self.peak
        self.used = position

    def check(self):
        """Verify the invariants in the module docstring; AssertionError if broken."""
        assert 0 <= self.used <= self.capacity, (self.used, self.capacity)
        assert self.peak >= self.used
        for lease in list(self._leases):
            assert 0 <= lease.start <= lease.end, lease
            # A lease above `used` exists only after an unchecked rewind under it.
        return True
