"""Allocation measures that work under every allocator, and fail when they cannot.

* Python allocations: tracemalloc hooks all three PyMem domains (raw, mem,
  object) whatever the allocator behind them, pymalloc or PYTHONMALLOC=malloc
  (sys.getallocatedblocks() is 0 under the latter, which made the old checks
  pass trivially in the sanitize run).
* C allocations (malloc from extension code, which tracemalloc cannot see):
  the bytes the C heap has handed out and not freed, from
  __sanitizer_get_current_allocated_bytes() when ASan is loaded (it replaces
  malloc), otherwise glibc's mallinfo2() (uordblks + hblkhd). This is a *net*
  measure: it catches memory retained per tick, not a malloc freed within the
  same tick. No LD_PRELOAD shim is needed (glibc's malloc hooks are gone).
  Where neither exists, c_heap_bytes() raises: the test fails, it never passes
  without a measure.
"""
import ctypes
import tracemalloc


class MeasureUnavailable(AssertionError):
    """The allocation measure a test relies on does not work here."""


def _libc():
    return ctypes.CDLL(None)


def c_heap_bytes():
    """Bytes the C heap holds for the process right now."""
    lib = _libc()
    try:
        f = lib.__sanitizer_get_current_allocated_bytes
    except AttributeError:
        f = None
    if f is not None:
        f.restype = ctypes.c_size_t
        return int(f())
    try:
        mallinfo2 = lib.mallinfo2
    except AttributeError:
        raise MeasureUnavailable("neither ASan's allocator statistics nor glibc's mallinfo2 is available") from None

    class Mallinfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                    "fsmblks", "uordblks", "fordblks", "keepcost")]
    mallinfo2.restype = Mallinfo2
    m = mallinfo2()
    if m.arena == 0 and m.hblkhd == 0:
        raise MeasureUnavailable("mallinfo2() reports an empty heap: malloc is not glibc's here")
    return int(m.uordblks + m.hblkhd)


class PythonAllocations:
    """with PythonAllocations() as m: ...  -> m.growth (net bytes), m.peak (transient bytes above the start)."""

    def __enter__(self):
        if tracemalloc.is_tracing():
            raise MeasureUnavailable("tracemalloc is already tracing (nested measure)")
        tracemalloc.start()
        if not tracemalloc.is_tracing():
            raise MeasureUnavailable("tracemalloc could not start")
        tracemalloc.reset_peak()
        self.start, _ = tracemalloc.get_traced_memory()
        return self

    def __exit__(self, *exc):
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        self.growth = current - self.start
        self.peak = peak - self.start
        return False


def per_call_rises(call, args_seq, warm=5):
    """Traced bytes each `call(*args)` rose above the memory before it (its
    transient peak: an object made and freed inside the call counts), for
    every args tuple of `args_seq` after the first `warm`. The first rounds
    after tracemalloc starts can show a one-off 32-64 bytes whose size and
    place depend on what ran before in the process (seen after the examples
    had run; no traced object survives it); an allocation per call shows on
    every call after them. The result list is preallocated, so the measure
    adds nothing inside the window."""
    args_seq = list(args_seq)
    rises = [0] * len(args_seq)
    if tracemalloc.is_tracing():
        raise MeasureUnavailable("tracemalloc is already tracing (nested measure)")
    tracemalloc.start()
    try:
        for i, args in enumerate(args_seq):
            cur, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            call(*args)
            _, peak = tracemalloc.get_traced_memory()
            rises[i] = peak - cur
    finally:
        tracemalloc.stop()
    return rises[warm:]
