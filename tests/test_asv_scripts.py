"""asv_bench/check_regression.sh reads `asv compare` tables (asv 0.6 format) right.

The full path (two commits built and benchmarked) takes minutes and is run by
hand (asv_bench/README.md); here only the verdict on a table is checked."""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "asv_bench", "check_regression.sh")
pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("awk") is None,
                                reason="needs bash and awk")

HEAD = """
Benchmarks that have got worse:

| Change   | Before [69f9e4a5] <demo~8>   | After [b2e8c9c1] <demo~1>   |   Ratio | Benchmark (Parameter)                                |
|----------|------------------------------|-----------------------------|---------|------------------------------------------------------|
"""


def verdict(rows):
    p = subprocess.run(["bash", SCRIPT, "--parse", "1.2"], input=HEAD + rows, capture_output=True,
                       text=True, timeout=30)
    return p.returncode, p.stdout


def test_slower_time_benchmark_is_a_regression():
    rc, out = verdict("| +        | 2.22±2ms   | 4.75±2ms   |    2.14 | bench_tracker.TrackerTick.time_tick(10000, 'dod') |\n")
    assert rc == 1 and "REGRESSION: 1 benchmark" in out


def test_new_failure_is_a_regression():
    rc, _ = verdict("| !        | 1.00ms   | failed   |    n/a | bench_arena.Frame.time_frames('arena') |\n")
    assert rc == 1


def test_speedups_are_read_the_other_way_round():
    up = "| +        | 20.0   | 40.0   |    2.00 | bench_tracker.Window.track_speedup_vs_reference(1000) |\n"
    down = "| -        | 40.0   | 20.0   |    0.50 | bench_tracker.Window.track_speedup_vs_reference(1000) |\n"
    assert verdict(up)[0] == 0
    assert verdict(down)[0] == 1


def test_unchanged_and_improved_pass():
    rows = ("|          | 192±3μs   | 194±5μs   | 1.01    | bench_tracker.TrackerTick.time_tick(1000, 'dod') |\n"
            "| -        | 8.7ms     | 4.2ms     | 0.48    | bench_tracker.TrackerTick.time_tick(1000, 'reference') |\n"
            "| x        | 1.0ms     | 3.0ms     | 3.00    | bench_table.Insert.time_table_insert_many |\n")
    rc, out = verdict(rows)
    assert rc == 0 and "no regression" in out


def test_bad_factor_and_missing_arguments_exit_2():
    assert subprocess.run(["bash", SCRIPT], capture_output=True, timeout=30).returncode == 2
    p = subprocess.run(["bash", SCRIPT, "HEAD", "HEAD", "-b"], capture_output=True, text=True,
                       timeout=30, cwd=ROOT)
    assert p.returncode == 2 and "FACTOR must be a number" in p.stderr


def test_scripts_parse():
    for name in ("history.sh", "check_regression.sh"):
        assert subprocess.run(["bash", "-n", os.path.join(ROOT, "asv_bench", name)]).returncode == 0


GATE = os.path.join(ROOT, "asv_bench", "ci_gate.sh")
VERDICT = ("REGRESSION: 2 benchmark(s) of HEAD worse than BASE by more than 1.5x:\n"
           "| +        | 2.22±2ms   | 4.75±2ms   |    2.14 | bench_tracker.TrackerTick.time_tick(10000, 'dod') |\n"
           "| -        | 40.0   | 20.0   |    0.50 | bench_pool.PoolPair.track_speedup_pool_vs_malloc |\n")


def _git_env():
    """The environment for committing in a test repository (any identity)."""
    return dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
                GIT_COMMITTER_EMAIL="t@t")


def _gate_repo(tmp_path, message):
    """A repository holding the gate scripts, its HEAD commit carrying `message`."""
    repo = tmp_path / "repo"
    (repo / "asv_bench").mkdir(parents=True)
    for name in ("ci_gate.sh", "check_regression.sh"):
        shutil.copy(os.path.join(ROOT, "asv_bench", name), repo / "asv_bench" / name)
    env = _git_env()
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"],
                ["git", "commit", "-q", "-m", "first"], ["git", "commit", "-q", "--allow-empty", "-m", message]):
        subprocess.run(cmd, cwd=repo, check=True, env=env, capture_output=True)
    return repo / "asv_bench" / "ci_gate.sh"


def gate_declared(tmp_path, message):
    script = _gate_repo(tmp_path, message)
    p = subprocess.run(["bash", str(script), "--declared", "HEAD"], input=VERDICT, capture_output=True,
                       text=True, timeout=30)
    return p.returncode, p.stdout


def test_gate_fails_an_undeclared_regression(tmp_path):
    rc, out = gate_declared(tmp_path, "faster, I promise")
    assert rc == 1 and out.count("NOT declared") == 2


def test_gate_needs_every_regression_declared_with_a_reason(tmp_path):
    rc, out = gate_declared(tmp_path, "tick\n\nBenchmark-Regression: TrackerTick.time_tick: gating costs 20 us\n"
                                      "Benchmark-Regression: PoolPair.track_speedup:\n")
    assert rc == 1
    assert "declared in" in out and "NOT declared: bench_pool.PoolPair.track_speedup_pool_vs_malloc" in out


def test_gate_passes_declared_regressions(tmp_path):
    rc, out = gate_declared(tmp_path, "tick\n\nBenchmark-Regression: TrackerTick.time_tick: gating costs 20 us\n"
                                      "Benchmark-Regression: track_speedup_pool: the pool's check is on, see #12\n")
    assert rc == 0 and "NOT declared" not in out


def test_gate_without_a_previous_commit_exits_2(tmp_path):
    script = _gate_repo(tmp_path, "second")
    p = subprocess.run(["bash", str(script), "HEAD~5"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "shallow clone" in p.stderr
    p = subprocess.run(["bash", str(script), "HEAD", "HEAD"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and "nothing to compare" in p.stdout


FIRST = ("REGRESSION: 2 benchmark(s) of HEAD worse than BASE by more than 1.5x:\n"
         "| +        | 22.8±1μs   | 36.5±5μs   |     1.6 | bench_table.InsertBatch.time_table_insert_many |\n"
         "| +        | 2.22±2ms   | 4.75±2ms   |    2.14 | bench_tracker.TrackerTick.time_tick(10000, 'dod') |\n")


def gate_confirmed(tmp_path, first, rerun):
    (tmp_path / "first").write_text(first)
    p = subprocess.run(["bash", GATE, "--confirmed", str(tmp_path / "first")], input=rerun,
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_gate_confirms_only_a_benchmark_that_regressed_both_times(tmp_path):
    # The rerun's pool speedup is new (noise once), its tick regressed the first time too.
    out = gate_confirmed(tmp_path, FIRST, VERDICT)
    assert out.splitlines() == [VERDICT.splitlines()[1]]
    # A different benchmark each time confirms nothing (CI's run of 2e64fd3 failed on that).
    assert gate_confirmed(tmp_path, FIRST.splitlines()[0] + "\n" + FIRST.splitlines()[1] + "\n",
                          VERDICT) == ""
    # A parameter is part of the name: time_tick(1000) does not confirm time_tick(10000).
    assert gate_confirmed(tmp_path, FIRST.replace("(10000,", "(1000,"), VERDICT) == ""


def test_gate_help_prints_its_header():
    p = subprocess.run(["bash", GATE, "--help"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and p.stdout.startswith("The benchmark regression gate")
    assert "set -uo" not in p.stdout


def test_gate_times_head_first_in_its_rerun_and_base_first_in_its_third_run(tmp_path):
    # A machine that slows down through the run makes whatever is timed
    # second look slower: timed in the same order twice, an unchanged
    # commit "regressed" twice (CI's run of 094f2a5: the tick 1.5x, the
    # pool, not changed, 2.2x). The rerun turns the order round.
    script = _gate_repo(tmp_path, "second")
    repo = script.parent.parent
    commits = subprocess.run(["git", "rev-parse", "HEAD~1", "HEAD"], cwd=repo, capture_output=True, text=True,
                             check=True).stdout.split()
    order = {}
    for which in ("first", "rerun", "third"):
        p = subprocess.run(["bash", str(script), "--order", which], cwd=repo, capture_output=True, text=True,
                           timeout=30)
        assert p.returncode == 0, p.stderr
        order[which] = p.stdout.split()
    assert order["first"] == commits and order["rerun"] == commits[::-1]
    # a third look, BASE first again: a slow spell across the middle of the
    # gate (B H | H B) times HEAD twice in a row, not three times
    assert order["third"] == commits


def _gate_repo_changing(tmp_path, path):
    """A gate repository whose HEAD commit changes only `path`."""
    script = _gate_repo(tmp_path, "first again")
    repo = script.parent.parent
    env = _git_env()
    target = repo / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("changed\n")
    for cmd in (["git", "add", "-A"], ["git", "commit", "-q", "-m", f"change {path}"]):
        subprocess.run(cmd, cwd=repo, check=True, env=env, capture_output=True)
    return script


def test_gate_does_not_time_a_commit_that_changes_nothing_built_or_timed(tmp_path):
    # CI's run of a docs-only commit (2026-12-04) "confirmed" a 2.9x pool
    # regression: the same binaries, timed while the vCPU's speed changed.
    script = _gate_repo_changing(tmp_path, "docs/notes.md")
    p = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, PYTHON="/bin/false"))
    assert p.returncode == 0 and "nothing to time" in p.stdout, p.stdout + p.stderr


def test_gate_times_a_commit_that_changes_the_package(tmp_path):
    script = _gate_repo_changing(tmp_path, "dod/tracker/_engine.pyx")
    # PYTHON that cannot build: the gate goes on to build, and says it cannot (exit 2)
    p = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHON="/bin/false"))
    assert "nothing to time" not in p.stdout and p.returncode == 2, p.stdout + p.stderr
