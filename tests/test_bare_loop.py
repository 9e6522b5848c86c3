"""dod.tracker._bare_loop: the bench's yardsticks (the loop: the same bits for
every thread count; the round trip: a time, or NaN without two threads)."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from dod.tracker._bare_loop import round_trip_ns, sweep
from dod.tracker.config import MAX_THREADS


def _numpy_sweep(x, passes):
    for _ in range(passes):
        x = (x + 1e-9) * 0.9999999
    return x


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 1000, 4099])
def test_every_thread_count_gives_numpy_bits(n):
    start = np.random.default_rng(n).normal(size=n)
    want = _numpy_sweep(start.copy(), 3)
    for threads in (1, 2, 3, 4, 5, 8):     # more threads than cores and than elements too
        buf = start.copy()
        assert sweep(buf, threads, 3) is None
        assert buf.tobytes() == want.tobytes(), threads


def test_bad_arguments_raise_before_anything_is_written():
    buf = np.arange(10.0)
    for threads in (0, -1, MAX_THREADS + 1):
        with pytest.raises(ValueError, match="threads"):
            sweep(buf, threads)
    with pytest.raises(ValueError, match="passes"):
        sweep(buf, 2, 0)
    assert buf.tobytes() == np.arange(10.0).tobytes()
    with pytest.raises(TypeError):
        sweep(None, 1)
    with pytest.raises((ValueError, TypeError)):
        sweep(np.arange(10, dtype=np.float32), 1)        # not float64
    with pytest.raises((ValueError, TypeError)):
        sweep(np.arange(20.0)[::2], 1)                    # not contiguous
    frozen = np.arange(10.0)
    frozen.flags.writeable = False
    with pytest.raises(ValueError):
        sweep(frozen, 1)
    assert frozen.tobytes() == np.arange(10.0).tobytes()


def test_round_trip_is_a_time():
    for rounds, batches in ((1, 1), (50, 3), (2000, 1)):
        ns = round_trip_ns(rounds, batches)
        # a time (how long is the machine's business: with more runnable
        # threads than cores, a round trip may wait for a time slice)
        assert math.isfinite(ns) and ns > 0.0, (rounds, batches, ns)


def test_round_trip_without_two_threads_is_nan_not_a_hang():
    # One thread in the region: the other half of the ping-pong never runs,
    # so a spin would never end; the function must see it and say NaN.
    code = "from dod.tracker._bare_loop import round_trip_ns; print(round_trip_ns(100, 2))"
    env = dict(os.environ, OMP_THREAD_LIMIT="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "nan"


def test_round_trip_bad_arguments_raise():
    for rounds, batches in ((0, 1), (-1, 1), (1, 0), (1_000_001, 1), (1, 1_000_001)):
        with pytest.raises(ValueError):
            round_trip_ns(rounds, batches)
    with pytest.raises(TypeError):
        round_trip_ns("many")
