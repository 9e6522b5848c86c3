"""GPU arenas through CuPy: a device arena kernels push into, a pinned host arena,
and a scope that routes CuPy's own allocations to a device arena.

Optional: importing ``dod`` or ``dod.cuda`` never needs CuPy or a GPU. CuPy is
imported the first time a GPU feature is used; without it that use raises
ImportError (no CuPy) or RuntimeError (CuPy, but no usable device), with
the reason.

- :class:`DeviceArena`: one device allocation made once. The host carves typed
  CuPy arrays from its front (a host-side bump, no CUDA call); kernels push
  into its push region with one ``atomicAdd`` on a header that lives in device
  memory; :meth:`DeviceArena.reset_pushes` is an 8-byte ``cudaMemsetAsync`` of
  that header's ``used`` word on the stream (no kernel, no host round trip).
- :class:`PinnedArena`: a :class:`dod.arena.Arena` over page-locked host memory,
  so its numpy arrays upload and download asynchronously.
- :meth:`DeviceArena.scope`: ``with arena.scope():`` routes every CuPy
  allocation of the block to the arena and rewinds at exit, except under
  arrays that escaped the block (they stay valid and are reported).
- :mod:`dod.cuda.frame`: the CPU+GPU frame (pinned columns, three async
  uploads, a threshold kernel pushing hits, async readback, one sync) and the
  allocating version it is measured against (``python -m dod.cuda.bench``).

The device-side API (the header struct and ``dod_gpu_arena_push``) is CUDA C in
:data:`dod.cuda.kernels.ARENA_SOURCE`; prepend it to a ``cupy.RawModule``.

Floors: this package uses only floor 1 (``dod.arena``) and CuPy.
"""

_EXPORTS = {
    "DeviceArena": "dod.cuda.device_arena",
    "AllocatorScope": "dod.cuda.device_arena",
    "EscapeWarning": "dod.cuda.device_arena",
    "PinnedArena": "dod.cuda.pinned_arena",
    "ARENA_SOURCE": "dod.cuda.kernels",
    "HEADER_BYTES": "dod.cuda.kernels",
    "PUSH_GRANULE": "dod.cuda.kernels",
}

_INSTALL_HINT = ("dod.cuda needs CuPy for the GPU features: install the wheel for your CUDA, "
                 "e.g. `pip install cupy-cuda12x` (CUDA 12) or `pip install cupy-cuda13x` (CUDA 13)")


def require_cupy():
    """The ``cupy`` module, or ImportError saying how to install it."""
    try:
        import cupy
    except ImportError as e:
        raise ImportError(f"{_INSTALL_HINT} ({e})") from e
    return cupy


def require_device():
    """The ``cupy`` module once a CUDA device is usable; ImportError without
    CuPy, RuntimeError (with CUDA's reason) without a device."""
    cp = require_cupy()
    try:
        n = cp.cuda.runtime.getDeviceCount()
    except Exception as e:              # CUDARuntimeError: no driver, no device...
        raise RuntimeError(f"dod.cuda: CuPy is installed but no CUDA device is usable ({e})") from e
    if n < 1:
        raise RuntimeError("dod.cuda: CuPy is installed but sees no CUDA device")
    return cp


def is_available():
    """True when CuPy imports and at least one CUDA device is usable. Never raises."""
    try:
        require_device()
    except (ImportError, RuntimeError):
        return False
    return True


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dod.cuda' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


def __dir__():
    return sorted(list(globals()) + list(_EXPORTS))
