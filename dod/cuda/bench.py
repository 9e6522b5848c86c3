"""``python -m dod.cuda.bench``: the GPU benchmarks of the ZII/arena article, through CuPy.

Sections (each row against its section's baseline, and against the floor):

frame
    The CPU+GPU frame (1000 detections, threshold on the GPU, hits read
    back): :class:`dod.cuda.frame.ArenaFrame` against the allocating frame
    with raw cudaMalloc/cudaFree per array (the article's baseline), and
    with CuPy's default memory pool. Host wall time per frame. The hits of
    all variants are checked equal first.
in-kernel
    1000 threads each allocate 16 bytes inside a kernel: device ``malloc`` +
    ``free`` against a device-arena push (one atomicAdd) plus its 8-byte
    reset; the empty kernel is the floor. GPU time per kernel (CUDA events
    around back-to-back launches from Python, so the floor includes the
    launch rate).
columns
    8 columns of 1000 float32 per frame, allocated and released from the
    host: cudaMalloc/cudaFree, cudaMallocAsync/cudaFreeAsync on a stream with
    a keep-all release threshold, CuPy's MemoryAsyncPool and default pool,
    the device arena's host bump (offsets only, and as CuPy arrays), and the
    ZII reset alone. The floor is 8 bumps of a Python int. Host wall time
    per frame, the stream synchronised once at the end of each run.

Numbers are medians of repeated runs; all of them include Python's own cost
(one CuPy call is a few microseconds), which the article's C++ did not pay.
"""
import argparse
import platform
import sys
import time

import numpy as np

from dod._report import header
from dod._report import section as render
from dod.bench import Section
from dod.cuda import require_device
from dod.cuda.kernels import get_function, launch

N_DETECTIONS = 1000
N_THREADS = 1000
ALLOC_BYTES = 16
N_COLUMNS = 8


def _median(values):
    values = sorted(values)
    return values[len(values) // 2]


def _host_time(body, iters, repeat, sync=None):
    """Median over `repeat` runs of microseconds per call of body() (iters calls per run)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        for _ in range(iters):
            body()
        if sync is not None:
            sync()
        times.append((time.perf_counter_ns() - t0) / iters / 1e3)
    return _median(times)


def _gpu_time(cp, stream, body, iters, repeat):
    """Median over `repeat` runs of GPU microseconds per body() (CUDA events on `stream`)."""
    times = []
    start, end = cp.cuda.Event(), cp.cuda.Event()
    for _ in range(repeat):
        start.record(stream)
        for _ in range(iters):
            body()
        end.record(stream)
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) * 1e3 / iters)
    return _median(times)


def _over(value, floor):
    return f"+{value - floor:.2f} us over the floor"


# ---------------------------------------------------------------- sections

def bench_frame(quick):
    """The GPU-frame Section: the arena frame against the allocating one.

    1000 detections thresholded on the GPU, the hits read back, per frame;
    needs CuPy and a GPU.

    Parameters
    ----------
    quick : bool
        Fewer iterations and repetitions (noisier numbers).

    Returns
    -------
    Section
        The table's rows, as ``python -m dod.cuda.bench`` prints them.

    Raises
    ------
    ImportError
        Without CuPy.
    RuntimeError
        Without a usable CUDA device.
    AssertionError
        When the two ways compared do not compute the same result.

    Notes
    -----
    Thread-safety: run one benchmark at a time; it times the device, which
    another caller would share.
    """
    from dod.cuda.frame import ArenaFrame, allocating_frame, sorted_hits

    cp = require_device()
    sec = Section("GPU frame: 1000 detections, threshold on the GPU, hits read back",
                  baseline="allocating, cudaMalloc/cudaFree per array", per="frame",
                  goal="arena frame several times faster than the allocating one (3.3x in the article, C++)")
    frames, repeat = (50, 3) if quick else (300, 7)
    arena = ArenaFrame(N_DETECTIONS)
    idx = np.arange(N_DETECTIONS, dtype=np.float32)
    # Same hits first: the timing below is of equal work.
    for f in range(5):
        a = sorted_hits(arena.run(f))
        with cp.cuda.using_allocator(None):
            b = sorted_hits(allocating_frame(f, N_DETECTIONS, idx=idx))
        c = sorted_hits(allocating_frame(f, N_DETECTIONS, idx=idx))
        if not (np.array_equal(a, b) and np.array_equal(a, c)):
            raise AssertionError(f"frame {f}: the arena and allocating frames disagree")
    counter = iter(range(10 ** 9))

    def raw():
        with cp.cuda.using_allocator(None):
            allocating_frame(next(counter), N_DETECTIONS, idx=idx)

    t_raw = sec.add("allocating, cudaMalloc/cudaFree per array", _host_time(raw, frames, repeat), "us",
                    "numpy columns, cupy.asarray (sync copies), counter + output per frame")
    t_pool = sec.add("allocating, CuPy default memory pool",
                     _host_time(lambda: allocating_frame(next(counter), N_DETECTIONS, idx=idx), frames, repeat),
                     "us", "same code, CuPy's caching pool underneath")
    t_arena = sec.add("arena frame: pinned + device arena, 1 stream, 1 sync",
                      _host_time(lambda: arena.run(next(counter)), frames, repeat), "us",
                      "3 async uploads, 8-byte header reset, 1 async readback")
    sec.rows[-1].note += f"; {t_raw / t_arena:.2f}x vs cudaMalloc, {t_pool / t_arena:.2f}x vs pool"
    return sec


def bench_in_kernel(quick):
    """The in-kernel allocation Section: arena pushes against device malloc.

    1000 threads allocate 16 bytes each inside a kernel; needs CuPy and a GPU.

    Parameters
    ----------
    quick : bool
        Fewer iterations and repetitions (noisier numbers).

    Returns
    -------
    Section
        The table's rows, as ``python -m dod.cuda.bench`` prints them.

    Raises
    ------
    ImportError
        Without CuPy.
    RuntimeError
        Without a usable CUDA device.
    AssertionError
        When the two ways compared do not compute the same result.

    Notes
    -----
    Thread-safety: run one benchmark at a time; it times the device, which
    another caller would share.
    """
    cp = require_device()
    from dod.cuda.device_arena import DeviceArena

    sec = Section("In-kernel allocation: 1000 threads x 16 B", baseline="device malloc + free", per="kernel",
                  goal="arena push costs about the floor; device malloc far above it")
    iters, repeat = (50, 3) if quick else (200, 7)
    stream = cp.cuda.Stream()      # blocking: ordered after the null stream's setup
    sink = cp.zeros(2, dtype=cp.uint64)
    n = np.int32(N_THREADS)
    nbytes = np.uint64(ALLOC_BYTES)
    empty = get_function("alloc_arena", "dod_empty")
    push = get_function("alloc_arena", "dod_alloc_arena")
    arena = DeviceArena(0, push_capacity=N_THREADS * ALLOC_BYTES, stream=stream)

    def floor_body():
        launch(empty, N_THREADS, (n, sink), stream=stream)

    def arena_body():
        arena.reset_pushes()
        launch(push, N_THREADS, (n, nbytes, arena.header, sink), stream=stream)

    def reset_body():
        arena.reset_pushes()

    floor_body(); arena_body(); stream.synchronize()            # compile, warm up
    floor = sec.add("empty kernel (floor)", _gpu_time(cp, stream, floor_body, iters, repeat), "us",
                    "launch from Python + empty kernel")
    try:
        malloc = get_function("alloc_malloc", "dod_alloc_malloc")

        def malloc_body():
            launch(malloc, N_THREADS, (n, nbytes, sink), stream=stream)

        malloc_body(); stream.synchronize()                     # first use sets up the device heap
        t = _gpu_time(cp, stream, malloc_body, iters, repeat)
        sec.add("device malloc + free", t, "us",
                f"{_over(t, floor)} = {(t - floor) * 1e3 / N_THREADS:.2f} ns per allocation")
    except Exception as e:              # a toolchain without device malloc: say so, keep going
        sec.baseline = "empty kernel (floor)"
        sec.add("device malloc + free", float("nan"), "us", f"not measured: {type(e).__name__}: {e}"[:160])
    t = _gpu_time(cp, stream, arena_body, iters, repeat)
    sec.add("device arena push (atomicAdd) + 8-byte reset", t, "us",
            f"{_over(t, floor)} = {(t - floor) * 1e3 / N_THREADS:.3f} ns per allocation")
    t = _gpu_time(cp, stream, reset_body, iters, repeat)
    sec.add("8-byte reset alone (cudaMemsetAsync)", t, "us", "ZII: no kernel")
    failed = int(sink[0].get())
    if failed:
        sec.rows[-1].note += f"; WARNING: {failed} allocations failed"
    return sec


def bench_columns(quick):
    """The host-side columns Section: bump allocation over one device buffer
    against cudaMalloc/cudaFree.

    8 columns of 1000 float32 per frame; needs CuPy and a GPU.

    Parameters
    ----------
    quick : bool
        Fewer iterations and repetitions (noisier numbers).

    Returns
    -------
    Section
        The table's rows, as ``python -m dod.cuda.bench`` prints them.

    Raises
    ------
    ImportError
        Without CuPy.
    RuntimeError
        Without a usable CUDA device.
    AssertionError
        When the two ways compared do not compute the same result.

    Notes
    -----
    Thread-safety: run one benchmark at a time; it times the device, which
    another caller would share.
    """
    cp = require_device()
    from dod.cuda.device_arena import DeviceArena

    rt = cp.cuda.runtime
    sec = Section("8 columns of 1000 float32 per frame, from the host", baseline="cudaMalloc + cudaFree",
                  per="frame", goal="host bump over one buffer near the floor; reset is one memset")
    iters, repeat = (200, 3) if quick else (1000, 7)
    nbytes = N_DETECTIONS * 4
    stream = cp.cuda.Stream()      # blocking: ordered after the null stream's setup
    sptr = int(stream.ptr)
    sync = stream.synchronize

    def floor_body():
        off = 0
        for _ in range(N_COLUMNS):
            off = (off + nbytes + 255) & ~255
        return off

    floor = sec.add("floor: 8 bumps of a Python int", _host_time(floor_body, iters, repeat), "us", "")

    def cuda_malloc():
        ptrs = [rt.malloc(nbytes) for _ in range(N_COLUMNS)]
        for p in ptrs:
            rt.free(p)

    t = sec.add("cudaMalloc + cudaFree", _host_time(cuda_malloc, iters, repeat, sync), "us", "")
    sec.rows[-1].note = _over(t, floor)

    # cudaMallocAsync with a keep-all release threshold on the device's current pool.
    try:
        pool = rt.deviceGetMemPool(rt.getDevice())
        attr = rt.cudaMemPoolAttrReleaseThreshold
        old = rt.memPoolGetAttribute(pool, attr)
        rt.memPoolSetAttribute(pool, attr, 2 ** 64 - 1)
        try:
            def malloc_async():
                ptrs = [rt.mallocAsync(nbytes, sptr) for _ in range(N_COLUMNS)]
                for p in ptrs:
                    rt.freeAsync(p, sptr)

            malloc_async(); sync()
            t = sec.add("cudaMallocAsync + cudaFreeAsync (keep-all)", _host_time(malloc_async, iters, repeat, sync),
                        "us", "")
            sec.rows[-1].note = _over(t, floor)
            apool = cp.cuda.MemoryAsyncPool()

            def async_pool():
                with stream:
                    ptrs = [apool.malloc(nbytes) for _ in range(N_COLUMNS)]
                    del ptrs

            async_pool(); sync()
            t = sec.add("CuPy MemoryAsyncPool.malloc (MemoryPointer objects)",
                        _host_time(async_pool, iters, repeat, sync), "us", "")
            sec.rows[-1].note = _over(t, floor)
        finally:
            rt.memPoolSetAttribute(pool, attr, old)
    except Exception as e:
        sec.add("cudaMallocAsync + cudaFreeAsync (keep-all)", float("nan"), "us",
                f"not measured: {type(e).__name__}: {e}"[:160])

    def cupy_pool():
        with stream:
            cols = [cp.empty(N_DETECTIONS, dtype=cp.float32) for _ in range(N_COLUMNS)]
            del cols

    cupy_pool(); sync()
    t = sec.add("CuPy default pool: cupy.empty x 8", _host_time(cupy_pool, iters, repeat, sync), "us", "")
    sec.rows[-1].note = _over(t, floor)

    arena = DeviceArena(N_COLUMNS * ((nbytes + 255) & ~255), push_capacity=256, stream=stream)
    bump = arena._bump

    def arena_offsets():
        for _ in range(N_COLUMNS):
            bump.push(nbytes, 256, arena)
        bump.release_to(0, True)

    t = sec.add("device arena: host bump, offsets only", _host_time(arena_offsets, iters, repeat), "us",
                "")
    sec.rows[-1].note = _over(t, floor) + " (the article's host bump carving)"

    def arena_arrays():
        cols = [arena.empty(N_DETECTIONS, np.float32) for _ in range(N_COLUMNS)]
        del cols
        arena.rewind(start)

    start = arena.mark()
    t = sec.add("device arena: 8 CuPy arrays + rewind", _host_time(arena_arrays, iters, repeat, sync), "us", "")
    sec.rows[-1].note = _over(t, floor) + " (Python objects dominate)"

    def reset():
        arena.reset_pushes()

    t = sec.add("ZII reset: 8-byte cudaMemsetAsync", _host_time(reset, iters, repeat, sync), "us", "")
    sec.rows[-1].note = _over(t, floor)
    return sec


SECTIONS = {"frame": bench_frame, "in-kernel": bench_in_kernel, "columns": bench_columns}


def device_line():
    """A one-line description of the current CUDA device, for the report's header.

    Returns
    -------
    str
        The device's name and index, the CUDA runtime and driver versions,
        and the CuPy, Python and numpy versions.

    Raises
    ------
    ImportError
        Without CuPy.
    RuntimeError
        Without a usable CUDA device.

    Notes
    -----
    Thread-safety: reads the device's properties only; any thread may call it.
    """
    cp = require_device()
    rt = cp.cuda.runtime
    dev = rt.getDevice()
    name = rt.getDeviceProperties(dev)["name"]
    if isinstance(name, bytes):
        name = name.decode()

    def version(v):
        return f"{v // 1000}.{(v % 1000) // 10}"

    return (f"{name} (device {dev}), CUDA runtime {version(rt.runtimeGetVersion())}, "
            f"driver {version(rt.driverGetVersion())}, CuPy {cp.__version__}, "
            f"Python {platform.python_version()}, numpy {np.__version__}")


def main(argv=None):
    """``python -m dod.cuda.bench``: parse `argv`, run the sections and print their tables.

    Parameters
    ----------
    argv : list of str or None, default None
        The command line (``--quick``, ``--only SECTION ...``,
        ``--markdown``); None reads ``sys.argv``.

    Returns
    -------
    int
        The exit status: 0, 1 when a section failed (reported, the others
        still run), 2 without CuPy or a device (reported on stderr).

    Raises
    ------
    SystemExit
        On a bad command line (argparse).

    Notes
    -----
    Thread-safety: a command-line entry point; run one at a time.
    """
    p = argparse.ArgumentParser(prog="python -m dod.cuda.bench", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer repetitions (noisier)")
    p.add_argument("--only", nargs="*", choices=list(SECTIONS), help="run only these sections")
    p.add_argument("--markdown", action="store_true", help="print Markdown tables (for the README)")
    args = p.parse_args(argv)
    try:
        device = device_line()
    except (ImportError, RuntimeError) as e:
        print(f"python -m dod.cuda.bench: {e}", file=sys.stderr)
        return 2
    print(header("dod.cuda.bench", sys.argv[1:] if argv is None else argv, device), flush=True)
    failures = 0
    for name in args.only or list(SECTIONS):
        try:
            section = SECTIONS[name](args.quick)
        except Exception as e:          # report and go on to the next table
            failures += 1
            print(f"[{name}] FAILED: {type(e).__name__}: {e}\n", flush=True)
            continue
        print(render(section, args.markdown), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
