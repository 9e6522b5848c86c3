"""The CPU+GPU frame, written twice: with arenas and one sync, and allocating everything.

One frame: the CPU produces ``n`` detections as three SoA columns (score, x,
y); the GPU keeps those whose score is above a threshold; the hits come back
to the CPU as records (index, score, x, y).

:class:`ArenaFrame` (RAII owners made once, arenas inside):
    CPU writes the columns into a pinned arena -> three async uploads into a
    device arena -> 8-byte memset of the hits header -> threshold kernel pushes
    hits with one atomicAdd each -> one async readback of header + hits ->
    one sync -> both arenas rewind.

:func:`allocating_frame` (the usual way):
    numpy allocates the columns -> ``cupy.asarray`` allocates device arrays and
    copies synchronously -> a counter and an output buffer are allocated ->
    kernel -> two synchronous downloads (the count, then the hits); every
    device array is freed at the end of the frame. Run it under
    ``cupy.cuda.using_allocator(None)`` for raw cudaMalloc/cudaFree per
    array, or under CuPy's default pool.

Both return the same hits (in device order; sort by ``index`` to compare).
"""
import operator

import numpy as np

from dod.cuda import require_device
from dod.cuda.kernels import HEADER_BYTES, get_function, launch

# One hit, as the kernels write it (struct dod_hit in dod.cuda.kernels).
HIT = np.dtype([("index", np.int32), ("score", np.float32), ("x", np.float32), ("y", np.float32)])

DEFAULT_THRESHOLD = 0.5


def detections(frame, idx, out=(None, None, None)):
    """The (score, x, y) float32 columns of frame `frame` for the detections `idx`.

    Deterministic, and the same bits whether written into `out` or into new
    arrays (the allocating and the arena frame share it): score in [0, 1], x
    and y in [-100, 100].

    Parameters
    ----------
    frame : int
        The frame number.
    idx : numpy.ndarray
        float32 detection indices, ``np.arange(n, dtype=np.float32)``.
    out : tuple of numpy.ndarray, optional
        Three float32 arrays of ``idx``'s shape to write into (None: new arrays).

    Returns
    -------
    tuple of numpy.ndarray
        ``(score, x, y)``: `out`'s arrays, or new ones.

    Raises
    ------
    ValueError, TypeError
        For `out` arrays of another shape or dtype (numpy's).

    Notes
    -----
    Thread-safety: a pure function (any thread); runs on the CPU, without CuPy.

    Examples
    --------
    >>> import numpy as np
    >>> from dod.cuda.frame import detections
    >>> score, x, y = detections(0, np.arange(4, dtype=np.float32))
    >>> bool(((score >= 0) & (score <= 1)).all()), x.dtype
    (True, dtype('float32'))
    """
    f = np.float32(frame)
    score, x, y = out
    score = np.multiply(idx, np.float32(0.618034), out=score)
    np.add(score, f * np.float32(0.1), out=score)
    np.sin(score, out=score)
    np.multiply(score, np.float32(0.5), out=score)
    np.add(score, np.float32(0.5), out=score)
    x = np.multiply(idx, np.float32(0.1), out=x)
    np.add(x, f * np.float32(0.01), out=x)
    np.cos(x, out=x)
    np.multiply(x, np.float32(100.0), out=x)
    y = np.multiply(idx, np.float32(0.37), out=y)
    np.subtract(y, f * np.float32(0.01), out=y)
    np.sin(y, out=y)
    np.multiply(y, np.float32(100.0), out=y)
    return score, x, y


def reference_hits(frame, n, threshold=DEFAULT_THRESHOLD):
    """The frame's hits computed on the CPU alone, sorted by index (the oracle).

    Parameters
    ----------
    frame : int
        The frame number.
    n : int
        Detections in the frame.
    threshold : float, default 0.5
        A detection is a hit when its score is above this.

    Returns
    -------
    numpy.ndarray
        Structured, dtype :data:`HIT` (index, score, x, y), one row per hit.

    Notes
    -----
    Thread-safety: a pure function (any thread); runs without CuPy.

    Examples
    --------
    >>> from dod.cuda.frame import reference_hits
    >>> hits = reference_hits(0, 1000)
    >>> hits.dtype.names, bool((hits["score"] > 0.5).all())
    (('index', 'score', 'x', 'y'), True)
    """
    idx = np.arange(n, dtype=np.float32)
    score, x, y = detections(frame, idx)
    keep = np.nonzero(score > np.float32(threshold))[0]
    hits = np.empty(keep.size, dtype=HIT)
    hits["index"] = keep
    hits["score"] = score[keep]
    hits["x"] = x[keep]
    hits["y"] = y[keep]
    return hits


def _check_n(n):
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"n must be an int, got {n!r}") from None
    if not 0 < n <= (1 << 26):
        raise ValueError(f"n must be in [1, 2**26], got {n}")
    return n


class ArenaFrame:
    """ArenaFrame(n=1000, *, threshold=0.5, stream=None)

    The frame with owners made once: pinned arena, device arena, stream, kernel.

    :meth:`run` does one frame and returns its hits as a numpy view into the
    pinned readback buffer, valid until the next :meth:`run` (copy it to keep
    it). Nothing is allocated per frame on the device, and on the host only
    the small numpy/CuPy array objects over arena memory.

    Parameters
    ----------
    n : int, default 1000
        Detections per frame, in [1, 2**26].
    threshold : float, default 0.5
        A detection is a hit when its score is above this.
    stream : cupy.cuda.Stream, optional
        The stream the frame runs on (default: a new non-blocking stream).

    Raises
    ------
    TypeError, ValueError
        For `n`.
    ImportError
        Without CuPy.
    RuntimeError
        Without a usable CUDA device (CUDA's reason).

    Notes
    -----
    Thread-safety: one thread at a time (one frame in flight).
    """

    def __init__(self, n=1000, *, threshold=DEFAULT_THRESHOLD, stream=None):
        n = _check_n(n)
        threshold = float(threshold)
        cp = require_device()
        from dod.cuda.device_arena import DeviceArena
        from dod.cuda.pinned_arena import PinnedArena

        self.n = n
        self.threshold = np.float32(threshold)
        self.stream = stream if stream is not None else cp.cuda.Stream(non_blocking=True)
        column = (4 * n + 255) & ~255
        readback = HEADER_BYTES + HIT.itemsize * n
        self.host = PinnedArena(3 * column + readback + 256)
        self.readback = self.host.empty(readback, np.uint8, align=256)   # lives as long as the frame
        self._idx = np.arange(n, dtype=np.float32)
        self.device = DeviceArena(3 * column, push_capacity=HIT.itemsize * n, stream=self.stream)
        self.kernel = get_function("threshold", "dod_threshold_arena")
        self._host_start = self.host.mark()
        self._device_start = self.device.mark()
        self.frames = 0

    def run(self, frame):
        """One frame: upload, threshold on the device, read the hits back.

        Parameters
        ----------
        frame : int
            The frame number (:func:`detections`).

        Returns
        -------
        numpy.ndarray
            Hits (dtype :data:`HIT`) in device order (:func:`sorted_hits` to
            compare): a view valid until the next run.

        Raises
        ------
        BufferError
            When an array of the previous frame is still alive (the arenas' checked rewind).

        Notes
        -----
        Thread-safety: one thread at a time.
        """
        host, dev, s = self.host, self.device, self.stream
        n = self.n
        # 1. CPU writes the SoA columns straight into pinned memory.
        score = host.empty(n, np.float32)
        x = host.empty(n, np.float32)
        y = host.empty(n, np.float32)
        detections(frame, self._idx, (score, x, y))
        # 2. Three async uploads into the device arena (carving is host arithmetic).
        d_score = dev.upload(score)
        d_x = dev.upload(x)
        d_y = dev.upload(y)
        # 3. ZII reset of the hits header: one 8-byte memset on the stream.
        dev.reset_pushes()
        # 4. The threshold kernel pushes each hit with one atomicAdd.
        launch(self.kernel, n, (d_score, d_x, d_y, np.int32(n), self.threshold, dev.header), stream=s)
        # 5. Async readback of header + hits, then the frame's one sync.
        dev.download_pushes(self.readback)
        s.synchronize()
        hits, asked = dev.pushes_from(self.readback, HIT)
        if asked > dev.push_capacity:       # cannot happen: at most n hits of n detections
            raise RuntimeError(f"hits overflowed the push region: {asked} > {dev.push_capacity} bytes")
        # 6. Arena resets (checked: nothing of this frame may still be alive).
        del score, x, y, d_score, d_x, d_y
        host.rewind(self._host_start)
        dev.rewind(self._device_start)
        self.frames += 1
        return hits


def allocating_frame(frame, n=1000, threshold=DEFAULT_THRESHOLD, idx=None):
    """The same frame, allocating everything per frame and syncing per copy.

    Uses CuPy's current allocator (wrap it in ``cupy.cuda.using_allocator(None)``
    for raw cudaMalloc/cudaFree) and the current stream: the baseline
    :class:`ArenaFrame` is compared with.

    Parameters
    ----------
    frame : int
        The frame number.
    n : int, default 1000
        Detections, in [1, 2**26].
    threshold : float, default 0.5
        A detection is a hit when its score is above this.
    idx : numpy.ndarray, optional
        ``np.arange(n, dtype=np.float32)``, made here when None.

    Returns
    -------
    numpy.ndarray
        A new array of hits (dtype :data:`HIT`) in device order.

    Raises
    ------
    TypeError, ValueError
        For `n`.
    ImportError, RuntimeError
        Without CuPy, or without a CUDA device.

    Notes
    -----
    Thread-safety: any thread (nothing shared but CuPy's current stream).
    """
    n = _check_n(n)
    cp = require_device()
    if idx is None:
        idx = np.arange(n, dtype=np.float32)
    score, x, y = detections(frame, idx)
    d_score = cp.asarray(score)
    d_x = cp.asarray(x)
    d_y = cp.asarray(y)
    count = cp.zeros(1, dtype=cp.uint32)
    out = cp.empty(n * HIT.itemsize, dtype=cp.uint8)
    kernel = get_function("threshold", "dod_threshold_counter")
    launch(kernel, n, (d_score, d_x, d_y, np.int32(n), np.float32(threshold), count, out))
    k = min(int(count.get()[0]), n)
    return out[: k * HIT.itemsize].get().view(HIT)


def sorted_hits(hits):
    """`hits` sorted by index (a copy), to compare frames whose kernels push in any order.

    Parameters
    ----------
    hits : array_like
        Structured, dtype :data:`HIT`.

    Returns
    -------
    numpy.ndarray

    Raises
    ------
    ValueError
        For an array without an ``index`` field (numpy's).

    Notes
    -----
    Thread-safety: a pure function (any thread).
    """
    return np.sort(np.asarray(hits), order="index")
