"""The tracker's results, scan by scan, against the golden hashes recorded
in tests/golden/tracker_hashes.json (tests/tracker_golden.py says how they
are made and when they may be rewritten): CV in 2-D and 3-D, the IMM,
range-bearing sensors in 2-D and 3-D, the IMM with radar, M-of-N and score
confirmation, single and two-point births, light and heavy clutter, a
table that overflows, scans with invalid rows and past max_detections;
each at several thread counts."""
import json

import pytest

import tracker_golden
from dod.tracker import simd_path, simd_paths, set_simd

GOLDEN = json.loads(tracker_golden.GOLDEN.read_text())


def test_every_case_has_a_golden_record():
    assert sorted(GOLDEN) == sorted(tracker_golden.CASES)


@pytest.mark.parametrize("name,threads", [(name, n) for name, case in tracker_golden.CASES.items()
                                          for n in case[3]])
def test_results_match_the_golden_hashes(name, threads):
    got = tracker_golden.run(name, threads)
    want = GOLDEN[name]
    assert len(got) == len(want)
    first = next((s for s, (a, b) in enumerate(zip(got, want)) if a != b), None)
    assert first is None, f"{name} at {threads} threads differs from the golden record from scan {first}"


def _lane_runs():
    """Each case with the track table in lanes: at its thread counts on the
    default instruction-set path, and at one thread on every other path."""
    for name, case in tracker_golden.CASES.items():
        for path in simd_paths():
            for n in (case[3] if path == simd_path() else (1,)):
                yield name, n, path


@pytest.mark.parametrize("name,threads,path", list(_lane_runs()))
def test_lanes_match_the_golden_hashes(name, threads, path):
    before = simd_path()
    set_simd(path)
    try:
        got = tracker_golden.run(name, threads, layout="lanes")
    finally:
        set_simd(before)
    want = GOLDEN[name]
    first = next((s for s, (a, b) in enumerate(zip(got, want)) if a != b), None)
    assert len(got) == len(want) and first is None, \
        f"{name} in lanes at {threads} threads on {path} differs from the golden record from scan {first}"
