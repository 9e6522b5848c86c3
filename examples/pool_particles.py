"""Particles in a fixed-size pool
==============================

Handles for identity, one numpy array over
every block for vectorised updates (python examples/pool_particles.py)."""
import numpy as np

from dod.pool import Pool

# Each block holds x, y, vx, vy (float32); a live block carries no bookkeeping.
particles = Pool(10_000, np.float32, (4,))
rng = np.random.default_rng(1)

alive = []
for frame in range(60):
    for _ in range(50):                                   # births
        h = particles.acquire()
        particles.view(h)[:] = (*rng.random(2), *(rng.random(2) - 0.5))
        alive.append(h)
    rows, live = particles.as_array(), particles.live_mask()
    rows[live, :2] += 0.02 * rows[live, 2:]               # every live particle, one numpy expression
    del rows                                              # views pin nothing, but keep them short-lived
    for h in alive[: len(alive) // 10]:                   # deaths
        particles.release(h)
    alive = alive[len(alive) // 10:]

print(f"{len(particles)} live particles, peak {particles.peak}, capacity {particles.capacity}")
stale = particles.acquire()
particles.release(stale)
try:
    particles.release(stale)                              # stale handle: an exception, never corruption
except ValueError as e:
    print("refused:", e)
