"""Pinned host arena: a :class:`dod.arena.Arena` over page-locked memory.

Page-locked (pinned) memory is what lets ``cudaMemcpyAsync`` run truly
asynchronously: the GPU's copy engine reads it by DMA while the CPU goes on.
A PinnedArena obtains one block of it with ``cupy.cuda.alloc_pinned_memory``
(once, at construction) and is otherwise exactly a :class:`dod.arena.Arena`
(fixed capacity): numpy arrays carved from it keep the pinned block alive,
and a reset or rewind under a live array raises BufferError unless
``unchecked=True``. No view can dangle.

One extra rule comes with asynchrony: an array handed to an async copy must
not be rewritten (or released and carved again) before the stream has run
the copy. The frame pattern does that with one sync per frame before the
arena is reset.
"""
import ctypes

import numpy as np

from dod.arena import Arena
from dod.cuda._bump import check_capacity


class PinnedArena(Arena):
    """PinnedArena(capacity)

    A fixed-capacity bump arena in page-locked host memory.

    ``capacity`` bytes come from ``cupy.cuda.alloc_pinned_memory`` (CuPy's
    pinned pool by default). Everything else is :class:`dod.arena.Arena`:
    ``empty``, ``zeros``, ``array``, ``mark``/``rewind``/``reset``/``scope``,
    the statistics. Copies between its arrays and the device are asynchronous
    on a stream (pageable memory would make them synchronous).

    Parameters
    ----------
    capacity : int
        Bytes, > 0.

    Raises
    ------
    TypeError, ValueError
        For a bad capacity (before any CUDA call).
    ImportError
        Without CuPy.
    cupy.cuda.runtime.CUDARuntimeError
        When CUDA refuses the memory.

    Notes
    -----
    Thread-safety: as :class:`dod.arena.Arena` (one thread at a time).
    """

    def __new__(cls, capacity):
        capacity = check_capacity(capacity)
        from dod.cuda import require_cupy

        cp = require_cupy()
        pinned = cp.cuda.alloc_pinned_memory(capacity)
        # A numpy view of the block: the Arena keeps it (and through its base,
        # the pinned block) alive for as long as the arena or any array lives.
        buffer = np.frombuffer(pinned, dtype=np.uint8, count=capacity)
        if not buffer.flags.writeable:
            # A CuPy whose pinned pointer exports a read-only buffer: view the
            # same bytes through their address. The arena object holds
            # `pinned` (below), and every array's lease holds the arena.
            raw = (ctypes.c_uint8 * capacity).from_address(int(pinned.ptr))
            buffer = np.frombuffer(raw, dtype=np.uint8, count=capacity)
        self = Arena.__new__(cls, capacity, buffer=buffer)
        self._pinned = pinned
        self._ptr = int(buffer.ctypes.data)
        return self

    def __init__(self, capacity):
        pass                    # all done in __new__ (the Arena is built there)

    @property
    def ptr(self):
        """Host address of the pinned block (an int), for CUDA calls that take a pointer."""
        return self._ptr

    def __repr__(self):
        return "<dod.cuda.PinnedArena" + super().__repr__()[len("<dod.Arena"):]
