"""The Python examples run as written and print what they compute (the GPU
one needs CuPy: tests/gpu; tracker_loop.py and tracker_demo.py run in
test_gaps.py; the .pyx ones are built by their tests). Each expected line is
recomputed here with plain numpy / Python, not read back from dod."""
import re
import runpy
from pathlib import Path

import numpy as np

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _run(name, capsys):
    ns = runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    return ns, capsys.readouterr().out.strip().splitlines()


def test_arena_scratch_counts_the_points_near_the_centre(capsys):
    ns, out = _run("arena_scratch.py", capsys)
    pos = np.random.default_rng(0).random((5_000, 2)) * 100.0
    near = int((np.hypot(pos[:, 0] - 50.0, pos[:, 1] - 50.0) < 10.0).sum())
    m = re.fullmatch(r"(\d+) points near the centre; peak scratch use (\d+) bytes of (\d+)", out[0])
    assert m and int(m[1]) == near
    assert 5_000 * 9 <= int(m[2]) <= int(m[3]) == 1 << 20        # 5,000 float64 + 5,000 bool
    assert out[1] == f"in a scope: {near}"
    assert ns["scratch"].used == 0                               # the scope rewound


def test_pool_particles_keeps_the_births_minus_the_deaths(capsys):
    ns, out = _run("pool_particles.py", capsys)
    alive = 0
    for _ in range(60):                                          # 50 births, a tenth dies
        alive += 50
        alive -= alive // 10
    m = re.fullmatch(r"(\d+) live particles, peak (\d+), capacity 10000", out[0])
    assert m and int(m[1]) == alive and int(m[2]) >= alive
    assert out[1].startswith("refused:") and "stale" in out[1].lower()


def test_table_basics_handles_survive_a_remove(capsys):
    ns, out = _run("table_basics.py", capsys)
    assert out[0] == "10 True False"                 # handles[10] keeps its row's id; handles[0] is stale
    schema = "\n".join(out[1:])
    for column in ("pos", "vel", "id", "hits"):
        assert re.search(rf"^{column}: ", schema, re.M), schema
    assert len(ns["particles"]) == 999
