"""A scratch arena reset every tick
================================

The per-tick temporaries of a loop cost
one pointer bump each and are freed by one store (python examples/arena_scratch.py)."""
import numpy as np

from dod.arena import Arena

scratch = Arena(1 << 20)                      # 1 MiB of anonymous pages, touched on first use
positions = np.random.default_rng(0).random((5_000, 2)) * 100.0


def step(arena, pos):
    """One tick: every temporary comes from the arena and dies with this call."""
    d = arena.empty(len(pos))                               # distances to the centre
    np.hypot(pos[:, 0] - 50.0, pos[:, 1] - 50.0, out=d)
    near = arena.zeros(len(pos), np.bool_)
    np.less(d, 10.0, out=near)
    return int(near.sum())


for tick in range(100):
    count = step(scratch, positions)
    scratch.reset()                            # frees the tick's arrays; BufferError if one escaped

print(f"{count} points near the centre; peak scratch use {scratch.peak} bytes of {scratch.capacity}")

# Scopes nest inside a tick: mark on enter, rewind on exit.
with scratch.scope():
    print("in a scope:", step(scratch, positions))
print(scratch)
