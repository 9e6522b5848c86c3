"""The CPU+GPU frame with arenas and one sync, against the allocating version.
===========================================================================

    python examples/gpu_frame.py [--frames 200] [--n 1000]

Needs CuPy and a CUDA GPU. One frame: the CPU writes 1000 detections
(score, x, y) as SoA columns into a pinned arena; three async uploads into a
device arena; an 8-byte memset resets the hits header; a threshold kernel
pushes each hit with one atomicAdd; one async copy brings header + hits back;
one sync; both arenas rewind. The allocating version does the same work with
numpy arrays, per-frame device allocations and synchronous copies.
"""
import argparse
import sys
import time

import numpy as np


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--frames", type=int, default=200)
    p.add_argument("--n", type=int, default=1000, help="detections per frame")
    args = p.parse_args(argv)

    import dod.cuda
    try:
        cp = dod.cuda.require_device()
    except (ImportError, RuntimeError) as e:
        print(f"examples/gpu_frame.py needs CuPy and a CUDA GPU: {e}", file=sys.stderr)
        return 2
    from dod.cuda.frame import ArenaFrame, allocating_frame, reference_hits, sorted_hits

    frame = ArenaFrame(args.n)             # the owners: made once, reused every frame
    idx = np.arange(args.n, dtype=np.float32)

    # Same hits, three ways (the GPU pushes in any order: compare sorted).
    for f in range(3):
        arena_hits = sorted_hits(frame.run(f))
        with cp.cuda.using_allocator(None):
            alloc_hits = sorted_hits(allocating_frame(f, args.n, idx=idx))
        assert np.array_equal(arena_hits, alloc_hits)
        assert np.array_equal(arena_hits, reference_hits(f, args.n))
    print(f"frame 2: {arena_hits.size} of {args.n} detections above the threshold; "
          "arena, allocating and CPU reference agree")

    def per_frame(run):
        t0 = time.perf_counter()
        for f in range(args.frames):
            run(f)
        return (time.perf_counter() - t0) / args.frames * 1e6

    def allocating(f):
        with cp.cuda.using_allocator(None):        # raw cudaMalloc/cudaFree per array
            allocating_frame(f, args.n, idx=idx)

    t_alloc = per_frame(allocating)
    t_arena = per_frame(frame.run)
    print(f"allocating frame (cudaMalloc per array, sync copies): {t_alloc:8.1f} us/frame")
    print(f"arena frame (pinned + device arena, one sync):        {t_arena:8.1f} us/frame"
          f"  ({t_alloc / t_arena:.2f}x)")
    print(frame.device)
    print(frame.host)
    return 0


if __name__ == "__main__":
    sys.exit(main())
