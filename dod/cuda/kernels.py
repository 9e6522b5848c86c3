"""CUDA C sources of dod.cuda and their compiled modules (CuPy ``RawModule``).

The sources are plain strings, importable without CuPy; :func:`get_function`
compiles a module the first time one of its kernels is asked for (NVRTC, with
nvcc as a fallback) and caches it.

.. not run: CUDA C declarations; tests/gpu/test_cuda_gpu.py compiles ARENA_SOURCE and runs its push on a GPU

Device-side arena API (:data:`ARENA_SOURCE`; prepend it to your own kernels)::

    struct dod_gpu_arena {            // HEADER_BYTES bytes at the start of the allocation
        unsigned long long used;      // bytes asked for by pushes since the last reset
        unsigned long long capacity;  // bytes of the push region (constant)
        ...                           // padding: the push region starts HEADER_BYTES in
    };
    __device__ void* dod_gpu_arena_push(dod_gpu_arena* a, unsigned long long nbytes);

``dod_gpu_arena_push`` rounds ``nbytes`` up to PUSH_GRANULE (16), takes its
offset with one ``atomicAdd`` on ``used`` and returns a 16-byte aligned
pointer into the push region, or 0 when the region is exhausted. ``used``
counts every request, failed ones included, so after the kernel the host
can tell how much was asked for (``DeviceArena.pushed()``): exhaustion is
detectable after the fact and never writes outside the region. Pushes of
one record type whose size is a multiple of 16 lie back to back: the region
reads as an array of records (``DeviceArena.pushes(dtype)``).
"""

HEADER_BYTES = 256          # the push region (and the carve region after it) stays 256-aligned
PUSH_GRANULE = 16           # every push is rounded up to this; pointers are this aligned

ARENA_SOURCE = r"""
struct dod_gpu_arena {
    unsigned long long used;
    unsigned long long capacity;
    unsigned long long reserved[30];
};

__device__ __forceinline__ void* dod_gpu_arena_push(dod_gpu_arena* a, unsigned long long nbytes)
{
    unsigned long long n = (nbytes + 15ull) & ~15ull;
    unsigned long long off = atomicAdd(&a->used, n);
    if (off > a->capacity || n > a->capacity - off)
        return 0;                       /* exhausted: `used` still records the request */
    return (char*)a + 256 + off;
}
"""

# One detection passing the threshold: 16 bytes, so pushed hits form an array.
HIT_SOURCE = r"""
struct dod_hit { int index; float score; float x; float y; };
"""

THRESHOLD_SOURCE = ARENA_SOURCE + HIT_SOURCE + r"""
/* The arena frame: each detection above the threshold pushes its hit. */
extern "C" __global__ void dod_threshold_arena(const float* score, const float* x, const float* y,
                                               int n, float threshold, dod_gpu_arena* hits)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = score[i];
    if (s > threshold) {
        dod_hit* h = (dod_hit*)dod_gpu_arena_push(hits, sizeof(dod_hit));
        if (h) { h->index = i; h->score = s; h->x = x[i]; h->y = y[i]; }
    }
}

/* The allocating frame: a counter and an output buffer allocated per frame. */
extern "C" __global__ void dod_threshold_counter(const float* score, const float* x, const float* y,
                                                 int n, float threshold, unsigned int* count,
                                                 dod_hit* out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = score[i];
    if (s > threshold) {
        unsigned int k = atomicAdd(count, 1u);
        if (k < (unsigned int)n) { out[k].index = i; out[k].score = s; out[k].x = x[i]; out[k].y = y[i]; }
    }
}
"""

# In-kernel allocation benchmark, arena side (and the empty-kernel floor, and
# a test kernel that pushes records tagged with the thread id).
ALLOC_ARENA_SOURCE = ARENA_SOURCE + r"""
extern "C" __global__ void dod_empty(int n, unsigned long long* sink) { }

extern "C" __global__ void dod_alloc_arena(int n, unsigned long long nbytes, dod_gpu_arena* a,
                                           unsigned long long* sink)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    char* p = (char*)dod_gpu_arena_push(a, nbytes);
    if (p == 0) { atomicAdd(sink, 1ull); return; }
    p[0] = (char)i;                       /* touch it, as the malloc kernel does */
}

/* Tests: thread i pushes 16 bytes {i, ~i, nbytes, 0}; failed pushes are counted. */
extern "C" __global__ void dod_push_tagged(int n, dod_gpu_arena* a, unsigned long long* failed)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned int* p = (unsigned int*)dod_gpu_arena_push(a, 16);
    if (p == 0) { atomicAdd(failed, 1ull); return; }
    p[0] = (unsigned int)i; p[1] = ~(unsigned int)i; p[2] = 16u; p[3] = 0u;
}
"""

# In-kernel allocation benchmark, device malloc side: its own module, so that a
# toolchain that cannot compile device malloc costs only this row.
ALLOC_MALLOC_SOURCE = r"""
extern "C" __global__ void dod_alloc_malloc(int n, unsigned long long nbytes, unsigned long long* sink)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    char* p = (char*)malloc(nbytes);
    if (p == 0) { atomicAdd(sink, 1ull); return; }
    p[0] = (char)i;
    free(p);
}
"""

SOURCES = {
    "threshold": THRESHOLD_SOURCE,
    "alloc_arena": ALLOC_ARENA_SOURCE,
    "alloc_malloc": ALLOC_MALLOC_SOURCE,
}

_modules = {}


def get_module(name):
    """The compiled ``cupy.RawModule`` for ``SOURCES[name]``, compiled once and kept.

    NVRTC first; if it fails, nvcc (``backend='nvcc'``).

    Parameters
    ----------
    name : str
        A key of :data:`SOURCES`.

    Returns
    -------
    cupy.RawModule
        With every kernel of the source already fetched (CuPy compiles
        lazily: errors surface here, not at the first launch).

    Raises
    ------
    KeyError
        When `name` is not a key of :data:`SOURCES`.
    ImportError
        Without CuPy.
    RuntimeError
        Without a usable CUDA device, or when both compilers fail (with both
        messages).

    Notes
    -----
    Thread-safety: the cache of compiled modules is a plain dict; two threads
    compiling the same module at once both compile it and one result is kept.
    Call it once before starting threads when that matters.
    """
    if name not in SOURCES:
        raise KeyError(f"no kernel module {name!r}; known: {sorted(SOURCES)}")
    mod = _modules.get(name)
    if mod is not None:
        return mod
    from dod.cuda import require_device

    cp = require_device()
    errors = []
    for backend in ("nvrtc", "nvcc"):
        try:
            mod = cp.RawModule(code=SOURCES[name], backend=backend)
            # Compilation is lazy in CuPy: fetch every kernel now so errors surface here.
            for kernel in _kernel_names(SOURCES[name]):
                mod.get_function(kernel)
        except Exception as e:          # CompileException, CUDADriverError...
            errors.append(f"{backend}: {type(e).__name__}: {e}")
            mod = None
            continue
        break
    if mod is None:
        raise RuntimeError(f"dod.cuda: could not compile kernel module {name!r}:\n" + "\n".join(errors))
    _modules[name] = mod
    return mod


def get_function(module, kernel):
    """A ``cupy.RawKernel`` of one kernel module.

    Parameters
    ----------
    module : str
        A key of :data:`SOURCES` (compiled by :func:`get_module` if needed).
    kernel : str
        The name of an ``extern "C" __global__`` function of that source.

    Returns
    -------
    cupy.RawKernel

    Raises
    ------
    KeyError
        When `module` is not a key of :data:`SOURCES`.
    ImportError, RuntimeError
        As :func:`get_module`; CuPy's error when the source has no `kernel`.

    Notes
    -----
    Thread-safety: as :func:`get_module`.
    """
    return get_module(module).get_function(kernel)


def _kernel_names(source):
    """Names of the ``extern "C" __global__`` kernels defined in `source`."""
    names = []
    marker = '__global__ void '
    for line in source.splitlines():
        line = line.strip()
        if line.startswith('extern "C" __global__ void '):
            names.append(line[len('extern "C" ') + len(marker):].split("(", 1)[0].strip())
    return names


def launch(kernel, n, args, stream=None, block=256):
    """Launch `kernel` over `n` threads (1-D grid).

    Parameters
    ----------
    kernel : cupy.RawKernel
        The kernel (from :func:`get_function`).
    n : int
        Threads to run; the grid has ceil(n / block) blocks (at least one).
    args : tuple
        The kernel's arguments, as CuPy passes them.
    stream : cupy.cuda.Stream or None, default None
        The stream to launch on; None: the current one.
    block : int, default 256
        Threads per block.

    Returns
    -------
    None
        The launch is asynchronous: synchronise the stream before reading
        results.

    Notes
    -----
    Thread-safety: launches are queued on the stream; threads that share a
    stream serialise on it.
    """
    grid = (max(1, (n + block - 1) // block),)
    if stream is None:
        kernel(grid, (block,), args)
    else:
        with stream:
            kernel(grid, (block,), args)
