"""GPU frame and allocation benchmarks (dod.cuda); skipped without CuPy and a GPU.

Each class times dod's way and its baseline in the same run. The full tables
(with the floors) come from ``python -m dod.cuda.bench``.
"""
import numpy as np


def _require_gpu():
    try:
        import dod.cuda
    except ImportError:
        raise NotImplementedError("dod.cuda does not exist at this commit")
    if not dod.cuda.is_available():
        raise NotImplementedError("no CuPy or no CUDA device")
    return dod.cuda.require_device()


class GpuFrame:
    """One CPU+GPU frame of 1000 detections: arenas + one sync vs allocating per frame."""

    def setup(self):
        self.cp = _require_gpu()
        from dod.cuda.frame import ArenaFrame, allocating_frame

        self.frame = ArenaFrame(1000)
        self.allocating_frame = allocating_frame
        self.idx = np.arange(1000, dtype=np.float32)
        self.frame.run(0)
        allocating_frame(0, 1000, idx=self.idx)

    def time_arena_frame(self):
        self.frame.run(1)

    def time_allocating_frame_cudamalloc(self):
        with self.cp.cuda.using_allocator(None):
            self.allocating_frame(1, 1000, idx=self.idx)

    def time_allocating_frame_cupy_pool(self):
        self.allocating_frame(1, 1000, idx=self.idx)


class GpuColumns:
    """8 columns of 1000 float32 per frame: device arena host bump vs cudaMalloc/cudaFree."""

    def setup(self):
        self.cp = _require_gpu()
        from dod.cuda import DeviceArena

        self.arena = DeviceArena(8 * 4096)
        self.start = self.arena.mark()
        self.rt = self.cp.cuda.runtime

    def time_cuda_malloc_free(self):
        ptrs = [self.rt.malloc(4000) for _ in range(8)]
        for p in ptrs:
            self.rt.free(p)

    def time_device_arena_columns(self):
        cols = [self.arena.empty(1000, np.float32) for _ in range(8)]
        del cols
        self.arena.rewind(self.start)

    def time_zii_reset(self):
        self.arena.reset_pushes()
