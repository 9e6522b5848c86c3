"""The track log: every scan's confirmed tracks and events, appended to a file by a background thread.

>>> import os, tempfile
>>> import numpy as np
>>> from dod.tracker import Tracker, TrackerConfig
>>> from dod.tracker.track_log import TrackLog, read_log
>>> tracker = Tracker(TrackerConfig(capacity=64, max_detections=64, events=True,
...                                 confirmation="m_of_n", initiation="single"))
>>> path = os.path.join(tempfile.mkdtemp(), "tracks.arrow")
>>> z = np.array([[0.0, 0.0], [500.0, 500.0]])
>>> with TrackLog(path, tracker, full="wait") as log:
...     for k in range(5):
...         tracker.tick(z + k, 0.1)
...         queued = log.append()          # after the tick: the scan copied into the ring
>>> log = read_log(path)                   # a pyarrow Table: one batch per scan
>>> sorted(set(log["scan"].to_pylist())), log.num_rows
([1, 2, 3, 4, 5], 20)
>>> sorted(set(log["kind"].to_pylist()))
['association', 'birth', 'confirmation', 'track']

What a file holds
    One table, one row per logged fact, one Arrow record batch per scan:
    ``scan`` (int64, the tracker's scan count after the tick), ``time``
    (float64, the scan clock :attr:`Tracker.time`), ``kind`` (a string,
    dictionary-encoded: one of :data:`KINDS`), ``id`` (uint64, the track; 0: none), ``row`` (int64,
    the scan row; -1: none), ``status`` (uint8), ``score`` (float64), ``x``
    (fixed-size list of 2 dim float64) and ``P`` (fixed-size list of
    (2 dim)^2 float64, row-major: the full covariance). A ``track`` row is
    a confirmed track after the scan (id, status, score, x, P); the other
    kinds are the scan's events (:meth:`Tracker.events`): ``birth`` (id and
    the scan row it started from), ``confirmation`` (id), ``death`` (id and
    the status it had), ``association`` (one per scan row the tick read:
    the row and the track it updated, id 0 for none). Event rows have NaN
    in score, x and P. One table rather than one per kind so that a scan
    is one batch: a crash can never leave a scan's tracks without its
    events. A tracker made without ``events=True`` logs its tracks only.
    The file opens with an empty batch (so that it is a readable log before
    the first scan); :func:`read_log` and :func:`repair` leave it out of
    their scans.

Format: an Arrow IPC stream (``.arrow``, ``.arrows``) by default; Parquet for ``.parquet``
    The IPC stream is written one complete message per scan, so what is on
    disk is always the schema and whole scans, plus at worst a torn last
    message when the process dies inside a write: :func:`read_log` reads up
    to the last complete scan and :func:`repair` cuts the torn tail (after
    which pyarrow, polars and duckdb read the file as it is). Parquet
    cannot do this: its footer is written when the file is closed, so a
    Parquet file killed mid-run is unreadable. For a ``.parquet`` path the
    log therefore writes the IPC stream as a journal beside it
    (``PATH.arrows``) and converts it when the log closes (then deletes
    it); after a crash the journal is there to :func:`repair` and
    :func:`convert`. Nothing but a complete file ever appears under the
    Parquet name (it is written under a temporary name and renamed).

Threads and memory
    :meth:`TrackLog.append` (the tick's thread, after the tick) copies the
    scan into the next free slots of a :class:`dod.ring.Ring` made once
    (``slots`` slots of ``slot_rows`` records, each column a region of its
    own so that every copy is contiguous: the record count, then id, row,
    score, x, the packed covariance, kind and status; a scan larger than a
    slot takes several, the slot's ``dt`` header carrying how many pieces
    are still to come). The copy is one pass in Cython
    (:mod:`dod.tracker._log_slot`) straight from the track table and the
    events' arrays: no numpy temporary, nothing allocated. One writer
    thread, made once, drains the ring, unpacks the covariances, builds the
    scan's batch and writes it. Memory is the ring's slots whatever the
    run's length (written once when the log is made, so that no append
    pays a fresh slot's page faults). The tick itself never waits on the
    disk and allocates nothing for the log. ``append`` costs about 0.15-0.2
    ms at 10,000 confirmed tracks (10-15 % of that tick; the bytes of the
    scan's tracks copied once) and 0.02-0.03 ms at 1,000.
    The writer's pace is the disk's: a scan of 10,000 tracks is ~5 MB
    (the full covariances), so at 50 Hz such a log writes 250 MB/s.
    When the ring is full (the disk is slower than the scans), ``full``
    decides: ``"drop"`` (default) skips the scan and counts it in
    :attr:`TrackLog.dropped` (the log shows a gap in ``scan``); ``"wait"``
    waits up to ``timeout`` seconds for a slot, then raises TimeoutError
    (a scan that timed out half-way through its slots is not written). The
    writer holds at most one scan beyond the ring (the pieces of a scan
    larger than a slot, gathered before its batch is built).

Errors
    A path that cannot be written (no such directory, a directory, no
    permission) raises OSError at construction and creates nothing. An
    error of the writer thread (the disk is full, refuses a write) is kept
    and raised by the next :meth:`TrackLog.append` or :meth:`TrackLog.close`
    as :class:`TrackLogError` chained to it; the file then holds the scans
    written before it.
"""
import os
import threading
import traceback

import numpy as np

from dod.ring import Ring, RingClosed
from dod.ring_producer import idle_priority
from dod.tracker._log_slot import fill_slot, finish_records, scan_records, slot_words

__all__ = ["TrackLog", "TrackLogError", "read_log", "repair", "convert", "log_schema", "KINDS"]

KINDS = ("track", "birth", "confirmation", "death", "association")
"""The values of the log's ``kind`` column, in the order of their codes."""

_EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"      # the IPC stream's end-of-stream marker


class TrackLogError(RuntimeError):
    """The track log's writer thread failed (its error is the ``__cause__``)."""


def _pyarrow():
    try:
        import pyarrow
    except ImportError:
        raise ImportError("the track log needs pyarrow: pip install pyarrow") from None
    return pyarrow


def log_schema(dim):
    """The log's Arrow schema for a tracker of `dim` position dimensions.

    Parameters
    ----------
    dim : int
        2 or 3.

    Returns
    -------
    pyarrow.Schema

    Notes
    -----
    Thread-safety: any thread.
    """
    pa = _pyarrow()
    n = 2 * dim
    return pa.schema([("scan", pa.int64()), ("time", pa.float64()),
                      ("kind", pa.dictionary(pa.uint8(), pa.string())),
                      ("id", pa.uint64()), ("row", pa.int64()), ("status", pa.uint8()),
                      ("score", pa.float64()), ("x", pa.list_(pa.float64(), n)),
                      ("P", pa.list_(pa.float64(), n * n))])


class _Layout:
    """Where each column of a slot's records lives: one region per column (copies are contiguous).

    A slot is float64 words: word 0 the record count, then id (uint64), row
    (int64), score, x (n per record), P (the packed upper triangle, n (n + 1)
    / 2), then kind and status (uint8) packed into the last words; the
    layout dod.tracker._log_slot fills.
    """

    def __init__(self, dim, rows):
        self.n = n = 2 * dim
        self.packed = n * (n + 1) // 2
        self.rows = rows
        self.words = slot_words(n, rows)

    def views(self, data):
        """The columns over a slot's words (views: drop them before the slot is handed on)."""
        R, n, m = self.rows, self.n, self.packed
        o = 1 + 3 * R
        tail = data[o + R * (n + m):].view(np.uint8)
        return (data[:1].view(np.int64), data[1:1 + R].view(np.uint64), data[1 + R:1 + 2 * R].view(np.int64),
                data[1 + 2 * R:o], data[o:o + R * n].reshape(R, n),
                data[o + R * n:o + R * (n + m)].reshape(R, m), tail[:R], tail[R:2 * R])


class _Sink:
    """The IPC writer's output, gathered so that a scan reaches the file in one write.

    The writer hands over the columns' buffers themselves (pyarrow Buffers
    over the scan's arrays) and small bytes objects for the metadata: the
    sink keeps references, not copies, and writes them with one writev
    (a copy of megabytes here would hold the GIL the tick's thread needs).
    """

    closed = False

    def __init__(self):
        self.parts = []

    def write(self, data):
        self.parts.append(data)
        return len(data)

    def flush(self):
        pass

    def drain_to(self, fd):
        parts, self.parts = self.parts, []
        views = [memoryview(p).cast("B") for p in parts]
        done = os.writev(fd, views) if views else 0
        for v in views:                 # after a short write: the rest, part by part
            if done >= v.nbytes:
                done -= v.nbytes
                continue
            _write_all(fd, v[done:])
            done = 0


def _open_log(path):
    """Open `path` for writing (replacing a file there): (fd, created). OSError, nothing created, when it cannot be."""
    if os.path.isdir(path):
        raise IsADirectoryError(f"the track log path {path!r} is a directory")
    created = not os.path.lexists(path)
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644), created


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        k = os.write(fd, view)
        view = view[k:]


class TrackLog:
    """TrackLog(path, tracker, *, slots=8, slot_rows=None, full="drop", timeout=1.0, idle=False)

    Append a tracker's confirmed tracks and events, scan by scan, to `path`.

    Parameters
    ----------
    path : str or os.PathLike
        The log file: an Arrow IPC stream, or Parquet when it ends in
        ``.parquet`` (module docstring). An existing file is replaced.
    tracker : dod.tracker.Tracker
        Its tracks (and events, when made with ``events=True``) are logged.
    slots : int, default 8
        Slots of the ring between :meth:`append` and the writer thread.
    slot_rows : int, optional
        Records per slot; default: the tracker's capacity plus twice its
        max_detections (one slot holds a typical scan), at most 65,536.
    full : {"drop", "wait"}, default "drop"
        What :meth:`append` does when the ring is full (module docstring).
    timeout : float, default 1.0
        Seconds ``full="wait"`` waits for a slot.
    idle : bool, default False
        Run the writer thread at idle priority
        (:func:`dod.ring_producer.idle_priority`, Linux ``SCHED_IDLE``): it
        writes in the loop's slack and never preempts the tick's thread or
        its workers; on a machine whose cores stay busy it falls behind and
        the ring absorbs it (``full`` decides what happens when full).

    Attributes
    ----------
    path : str
        The log file.
    journal : str
        The IPC stream written while the log runs: `path` itself, or
        ``path + ".arrows"`` for Parquet.
    events : bool
        Whether events are logged (the tracker records them).
    appended, written, dropped : int
        Scans queued by :meth:`append`, written by the writer thread, and
        dropped on a full ring.
    error : BaseException or None
        The writer thread's error, once it failed.
    idle_applied : bool
        Whether the writer thread runs at idle priority (set by the thread).

    Raises
    ------
    ValueError
        For a bad option.
    OSError
        When `path` cannot be written; nothing is created.
    ImportError
        Without pyarrow.

    Notes
    -----
    Thread-safety: :meth:`append` and :meth:`close` from one thread (the
    tracker's); the writer thread is the log's own.
    """

    def __init__(self, path, tracker, *, slots=8, slot_rows=None, full="drop", timeout=1.0, idle=False):
        pa = _pyarrow()
        if full not in ("drop", "wait"):
            raise ValueError(f'full must be "drop" or "wait", not {full!r}')
        if not (isinstance(slots, int) and slots >= 1):
            raise ValueError(f"slots must be an int >= 1, not {slots!r}")
        if not timeout >= 0:
            raise ValueError(f"timeout must be >= 0 seconds, not {timeout!r}")
        if not isinstance(idle, bool):
            raise ValueError(f"idle must be True or False, not {idle!r}")
        self.idle = idle
        self.idle_applied = False
        cfg = tracker.config
        if slot_rows is None:
            slot_rows = min(cfg.capacity + 2 * cfg.max_detections, 1 << 16)
        if not (isinstance(slot_rows, int) and slot_rows >= 1):
            raise ValueError(f"slot_rows must be an int >= 1, not {slot_rows!r}")
        try:
            tracker.events()
            self.events = True
        except RuntimeError:
            self.events = False
        self.path = os.fspath(path)
        self.parquet = self.path.endswith(".parquet")
        self.journal = self.path + ".arrows" if self.parquet else self.path
        if self.parquet:
            import pyarrow.parquet  # noqa: F401  (an ImportError now, not at close)
            if os.path.isdir(self.path):
                raise IsADirectoryError(f"the track log path {self.path!r} is a directory")
        self.tracker = tracker
        self.full = full
        self.timeout = float(timeout)
        self.dim = cfg.dim
        self.schema = log_schema(cfg.dim)
        self.dropped = 0
        self.appended = 0
        self.written = 0
        self.error = None
        self._closed = False
        self._pa = pa
        self._kinds = None
        self._fd, created = _open_log(self.journal)
        try:
            self._sink = _Sink()
            self._writer = pa.ipc.new_stream(self._sink, self.schema)
            self._layout = _Layout(cfg.dim, slot_rows)
            # The file opens with the schema, the kinds and an empty batch (scan 0), so that it is a
            # readable log before the first scan, and a disk that refuses is found now. Building it
            # also loads pyarrow's kernels (~0.1 s) here rather than while scans queue up.
            empty = [np.zeros(0, c.dtype) if c.ndim == 1 else np.zeros((0,) + c.shape[1:]) for c in
                     self._layout.views(np.zeros(self._layout.words))[1:]]
            self._writer.write_batch(self._batch(empty, 0, 0.0))
            self._sink.drain_to(self._fd)
            self._ring = Ring(slots, self._layout.words, (), np.float64)
            self._touch_slots()
            self._thread = threading.Thread(target=self._drain, name="dod-track-log", daemon=True)
            self._thread.start()
        except BaseException:
            os.close(self._fd)
            if created:
                os.unlink(self.journal)
            raise

    def _touch_slots(self):
        # The ring's pages are mapped on first write: write every slot once now (before the writer
        # thread starts), so that no append pays the page faults of a fresh slot (~1 ms for a slot
        # of 10,000 tracks).
        ring = self._ring
        for _ in range(ring.slots):
            data = ring.acquire_write(timeout=0).data
            data.fill(0.0)
            del data
            ring.commit()
        for _ in range(ring.slots):
            ring.acquire_read(timeout=0)
            ring.release()

    # ------------------------------------------------------------------ producer (the tracker's thread)

    def append(self):
        """Copy the tracker's latest scan (confirmed tracks, events) into the ring for the writer.

        Returns
        -------
        bool
            True when the scan was queued, False when it was dropped
            (``full="drop"`` and the ring full: counted in :attr:`dropped`).

        Raises
        ------
        TrackLogError
            The writer thread failed (its error chained).
        TimeoutError
            ``full="wait"`` and no slot came within ``timeout``.
        RuntimeError
            After :meth:`close`.

        Notes
        -----
        Thread-safety: the tracker's thread, between ticks (it reads the
        tracker's outputs).
        """
        if self._closed:
            raise RuntimeError("the track log is closed")
        self._raise_error()
        t = self.tracker
        rows, _ = scan_records(t, self.events)
        R = self._layout.rows
        pieces = max(1, -(-rows // R))
        if self.full == "drop" and pieces > self._ring.slots - len(self._ring):
            self.dropped += 1
            return False
        scan, time = t.scans, float(t.time)
        # Piece i of the scan holds its records i R .. (i + 1) R, copied by one nogil pass.
        slot = None
        try:
            for piece in range(pieces):
                slot = self._acquire()
                fill_slot(t, self.events, slot.data, R, piece * R)
                self._commit(slot, scan, time, pieces - piece - 1)
                slot = None
        except BaseException as e:
            traceback.clear_frames(e.__traceback__)     # (views of the slot in the traceback's frames block the abort)
            if slot is not None and slot.held:
                self._ring.abort()
            raise
        self.appended += 1
        return True

    def _acquire(self):
        try:
            return self._ring.acquire_write(timeout=self.timeout if self.full == "wait" else 0)
        except RingClosed:
            self._raise_error()
            raise RuntimeError("the track log is closed") from None

    def _commit(self, slot, scan, time, left):
        slot.count = self._layout.words
        slot.tag = scan
        slot.time = time
        slot.dt = float(left)
        self._ring.commit()

    def _raise_error(self):
        if self.error is not None:
            raise TrackLogError(f"the track log's writer failed writing {self.journal!r}: {self.error}") \
                from self.error

    # ------------------------------------------------------------------ the writer thread

    def _drain(self):
        ring = self._ring
        pending = []
        if self.idle:
            self.idle_applied = idle_priority()
        try:
            while True:
                try:
                    slot = ring.acquire_read(timeout=0.1)
                except TimeoutError:
                    continue
                if slot is None:            # closed and drained
                    return
                if pending and pending[0][0] != slot.tag:
                    pending = []            # the rest of that scan never came (append timed out): not written
                cols = self._layout.views(slot.data)
                m = int(cols[0][0])
                pending.append((slot.tag, slot.time, [c[:m].copy() for c in cols[1:]]))
                del cols
                last = slot.dt == 0.0
                ring.release()
                if last:
                    self._write_scan(pending)
                    pending = []
        except BaseException as e:          # kept for append/close; the ring stops taking scans
            self.error = e
            ring.close()

    def _write_scan(self, pieces):
        cols = pieces[0][2] if len(pieces) == 1 else [np.concatenate(c) for c in zip(*(p[2] for p in pieces))]
        self._writer.write_batch(self._batch(cols, pieces[0][0], pieces[0][1]))
        self._sink.drain_to(self._fd)       # one write per scan: whole messages, or a torn tail
        self.written += 1

    def _batch(self, cols, scan, time):
        """The scan's columns (id, row, score, x, packed P, kind, status: owned copies) as the log's record batch."""
        pa = self._pa
        ids, row, score, x, packed, kind, status = cols
        k = ids.shape[0]
        n = 2 * self.dim
        P = np.empty((k, n, n))
        finish_records(kind, score, x, packed, P)      # (without the GIL: the tick's thread keeps it)
        if self._kinds is None:
            self._kinds = pa.array(KINDS)
        return pa.record_batch([
            pa.array(np.full(k, scan, dtype=np.int64)), pa.array(np.full(k, time)),
            pa.DictionaryArray.from_arrays(pa.array(kind), self._kinds), pa.array(ids), pa.array(row),
            pa.array(status), pa.array(score), pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), n),
            pa.FixedSizeListArray.from_arrays(pa.array(P.reshape(-1)), n * n)], schema=self.schema)

    # ------------------------------------------------------------------ end

    def close(self):
        """Write what the ring holds, end the stream, join the writer (and convert to Parquet).

        Raises
        ------
        TrackLogError
            The writer thread failed (its error chained); the file holds the
            scans written before it.

        Notes
        -----
        Idempotent. Thread-safety: the thread that calls :meth:`append`.
        """
        if self._closed:
            return
        self._closed = True
        self._ring.close()
        self._thread.join()
        try:
            if self.error is None:
                self._writer.close()
                self._sink.drain_to(self._fd)
        finally:
            os.close(self._fd)
        self._raise_error()
        if self.parquet:
            convert(self.journal, self.path)
            os.unlink(self.journal)

    def __enter__(self):
        """The log itself; leaving the block closes it (:meth:`close`)."""
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()
        return False

    def __repr__(self):
        return (f"<dod.tracker.TrackLog {self.path!r} appended={self.appended} written={self.written} "
                f"dropped={self.dropped}{' closed' if self._closed else ''}>")


def _batches(path):
    """The complete batches of an IPC stream and the byte offset where they end (a torn tail is left out)."""
    pa = _pyarrow()
    batches = []
    with pa.OSFile(os.fspath(path), "rb") as f:
        reader = pa.ipc.open_stream(f)
        schema = reader.schema
        end = f.tell()
        while True:
            try:
                batches.append(reader.read_next_batch())
            except StopIteration:
                break
            except (pa.ArrowInvalid, OSError):       # the torn tail of a crashed log
                break
            end = f.tell()
    return schema, batches[1:], end             # (the first is the empty opening batch)


def read_log(path):
    """The scans of a track log up to its last complete one, as a pyarrow Table.

    Parameters
    ----------
    path : str or os.PathLike
        An IPC stream written by :class:`TrackLog` (complete, or cut short by
        a crash), or its Parquet file.

    Returns
    -------
    pyarrow.Table

    Raises
    ------
    OSError, pyarrow.ArrowInvalid
        A file that is not a track log (no schema).

    Notes
    -----
    Thread-safety: any thread; a log being written is read up to its last
    complete scan.
    """
    pa = _pyarrow()
    if os.fspath(path).endswith(".parquet"):
        import pyarrow.parquet as pq
        return pq.read_table(path)
    schema, batches, _ = _batches(path)
    return pa.Table.from_batches(batches, schema=schema)


def repair(path):
    """Cut a crashed IPC track log after its last complete scan and end the stream.

    Afterwards every Arrow reader (pyarrow, polars, duckdb through Arrow)
    reads it whole. A complete log is left as it is.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    int
        The complete scans (batches) it holds.

    Notes
    -----
    Thread-safety: never on a log still being written.
    """
    _, batches, end = _batches(path)
    with open(path, "r+b") as f:
        f.seek(end)
        tail = f.read(len(_EOS))
        if tail != _EOS:
            f.seek(end)
            f.truncate()
            f.write(_EOS)
    return len(batches)


def convert(src, dst, *, scans_per_group=64):
    """Write the complete scans of an IPC track log `src` as a Parquet file `dst`.

    `dst` appears only when complete (written under ``dst + ".partial"``,
    then renamed). One row group per `scans_per_group` scans.

    Parameters
    ----------
    src, dst : str or os.PathLike
    scans_per_group : int, default 64

    Returns
    -------
    int
        The scans written.

    Notes
    -----
    Thread-safety: any thread; `src` may still be being written (its
    complete scans so far are converted).
    """
    pa = _pyarrow()
    import pyarrow.parquet as pq
    schema, batches, _ = _batches(src)
    tmp = os.fspath(dst) + ".partial"
    with pq.ParquetWriter(tmp, schema) as w:
        for i in range(0, len(batches), scans_per_group):
            w.write_table(pa.Table.from_batches(batches[i:i + scans_per_group], schema=schema))
    os.replace(tmp, dst)
    return len(batches)
