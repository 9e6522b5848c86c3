"""The bench's --passes table's shares of the tick. No timing is compared
with anything: speed goals live in the benchmarks."""

import numpy as np
import pytest


def test_passes_table_prints_each_pass_share_of_the_tick():
    from dod.tracker._engine import PASS_NAMES
    from dod.tracker.bench import run
    lines = []
    (row,) = run(sizes=(500,), scans=10, threads=(1,), reference=False, passes=True, out=lines.append)
    shares = row["pass_shares"][1]
    assert shares.shape == (len(PASS_NAMES) + 1,) and (shares[:-1] >= 0).all()
    at = next(i for i, ln in enumerate(lines) if "where the dod tick goes" in ln)
    assert lines[at + 1].split()[:3] == ["N", "threads", "of"] and "outside" in lines[at + 1]
    ms, pct = lines[at + 2].split(), lines[at + 3].split()
    assert ms[2] == "ms" and pct[:2] == ["%", "tick"]
    assert [float(v) for v in pct[2:2 + len(PASS_NAMES) + 1]] == pytest.approx(100 * shares, abs=0.051)
    assert np.isclose(float(ms[3 + PASS_NAMES.index("predict_gate")]), row["passes"][1][0][1], atol=5e-4)
