# dod/bench/_particles.pxd: the particle workload shared by the pool and table
# benchmark kernels (the pools issue's churn and throughput, run on both).
from libc.stdint cimport uint32_t, uint64_t

# A particle is 32 bytes: position, velocity (float32 x3 each), age, flags.
ctypedef struct particle:
    float x, y, z, vx, vy, vz, age
    uint32_t flags


cdef inline uint64_t xorshift64(uint64_t* s) noexcept nogil:
    """Marsaglia's xorshift: the kernels' cheap, seeded randomness (s != 0)."""
    cdef uint64_t x = s[0]
    x ^= x << 13
    x ^= x >> 7
    x ^= x << 17
    s[0] = x
    return x


cdef inline void spawn_particle(particle* q, uint64_t r) noexcept nogil:
    q.x = <float>(r & 0xFF)
    q.y = <float>((r >> 8) & 0xFF)
    q.z = 0.0
    q.vx = 1.0
    q.vy = -1.0
    q.vz = 0.5
    q.age = 0.0
    q.flags = 1
