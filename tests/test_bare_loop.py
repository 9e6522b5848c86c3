"""dod.tracker._bare_loop: the bench's yardstick, the same bits for every thread count."""
import numpy as np
import pytest

from dod.tracker._bare_loop import sweep
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
