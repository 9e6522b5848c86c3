"""asv_bench/plot_history.py on synthetic asv 0.6 results: good input and bad.

The result files are written here in the format asv 0.6.6 stores
(results/<machine>/machine.json, <commit>-<env>.json with result_columns,
results/benchmarks.json); the script runs as a subprocess, as history.sh runs
it, so a traceback would show on stderr."""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "asv_bench", "plot_history.py")
COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a", "stats_ci_99_b",
           "stats_q_25", "stats_q_75", "stats_number", "stats_repeat", "samples", "profile"]
ENV = "virtualenv-py3.11-numpy2.4.6"

BENCHMARKS = {
    "bench_x.Speed.track_speedup_vs_base": {
        "name": "bench_x.Speed.track_speedup_vs_base", "type": "track", "unit": "x",
        "params": [["100", "1000"]], "param_names": ["n"], "version": "v-speed"},
    "bench_x.Speed.time_work": {
        "name": "bench_x.Speed.time_work", "type": "time", "unit": "seconds",
        "params": [], "param_names": [], "version": "v-work"},
    "bench_y.Other.time_thing": {
        "name": "bench_y.Other.time_thing", "type": "time", "unit": "seconds",
        "params": [["'a'", "'b'"]], "param_names": ["kind"], "version": "v-thing"},
}

GOALS = '''
class Speed:
    def track_speedup_vs_base(self, n):
        return 1.0
    track_speedup_vs_base.unit = "x"
    track_speedup_vs_base.goal = {1000: 5.0}

    def time_work(self):
        pass
    time_work.goal = 0.002
'''


def write_results(root, commits, benchmarks=BENCHMARKS, machine="box", stale=False, version=None):
    """commits: [(hash, date_ms, scale)]: one result file per commit."""
    res = os.path.join(root, "results")
    os.makedirs(os.path.join(res, machine), exist_ok=True)
    with open(os.path.join(res, "benchmarks.json"), "w") as f:
        json.dump(dict(benchmarks, version=2), f)
    with open(os.path.join(res, machine, "machine.json"), "w") as f:
        json.dump({"machine": machine, "cpu": "Test CPU", "num_cpu": "2", "os": "Linux", "version": 1}, f)
    for h, date, scale in commits:
        results = {
            "bench_x.Speed.track_speedup_vs_base": [[6.0 * scale, 4.0 * scale], [["100", "1000"]],
                                                    version or "v-speed", 0, 1.0],
            "bench_x.Speed.time_work": [[0.001 / scale], [], "v-work", 0, 1.0, [0.0009], [0.0011]],
            "bench_y.Other.time_thing": [[2e-6, None], [["'a'", "'b'"]], "v-thing", 0, 1.0],
        }
        if stale:
            results = {"bench_gone.Old.time_old": [[1.0], [], "v-old", 0, 1.0]}
        data = {"commit_hash": h, "env_name": ENV, "date": date, "params": {"machine": machine},
                "python": "3.11", "requirements": {}, "env_vars": {}, "result_columns": COLUMNS,
                "results": results, "durations": {}, "version": 2}
        with open(os.path.join(res, machine, f"{h[:8]}-{ENV}.json"), "w") as f:
            json.dump(data, f)
    return res


def run(tmp_path, *args):
    bdir = tmp_path / "benchmarks"
    bdir.mkdir(exist_ok=True)
    (bdir / "bench_x.py").write_text(GOALS)
    p = subprocess.run([sys.executable, SCRIPT, "--results", str(tmp_path / "results"),
                        "--benchmarks", str(bdir), "--out", str(tmp_path / "out"), *args],
                       capture_output=True, text=True, timeout=300)
    assert "Traceback" not in p.stderr, p.stderr
    return p


HASHES = [f"{i:02x}" * 20 for i in range(1, 5)]


def test_missing_results_directory(tmp_path):
    p = run(tmp_path)
    assert p.returncode == 1
    assert "no results directory" in p.stderr and "history.sh" in p.stderr


def test_empty_results_directory(tmp_path):
    (tmp_path / "results").mkdir()
    p = run(tmp_path)
    assert p.returncode == 1 and "no results in" in p.stderr


def test_results_of_benchmarks_that_no_longer_exist(tmp_path):
    write_results(tmp_path, [(HASHES[0], 1000, 1.0), (HASHES[1], 2000, 1.0)], stale=True)
    p = run(tmp_path)
    assert p.returncode == 1
    assert "no longer exist" in p.stderr and "bench_gone.Old.time_old" in p.stderr


def test_unreadable_result_files_only(tmp_path):
    res = write_results(tmp_path, [(HASHES[0], 1000, 1.0)])
    for name in os.listdir(os.path.join(res, "box")):
        if name != "machine.json":
            with open(os.path.join(res, "box", name), "w") as f:
                f.write("{not json")
    p = run(tmp_path)
    assert p.returncode == 1 and "unreadable" in p.stderr


def test_one_commit_prints_the_table_and_exits_3(tmp_path):
    write_results(tmp_path, [(HASHES[0], 1000, 1.0)])
    p = run(tmp_path)
    assert p.returncode == 3
    assert "only one commit" in p.stderr
    assert HASHES[0][:8] in p.stdout and "track_speedup_vs_base(1000)" in p.stdout
    assert not (tmp_path / "out" / "index.html").exists()


def test_no_benchmark_matches_the_filter(tmp_path):
    write_results(tmp_path, [(HASHES[0], 1000, 1.0), (HASHES[1], 2000, 1.0)])
    p = run(tmp_path, "-b", "nothing_like_this")
    assert p.returncode == 1 and "no benchmark matching" in p.stderr


def test_bad_arguments_exit_2(tmp_path):
    assert run(tmp_path, "--last", "0").returncode == 2
    assert run(tmp_path, "-b", "(").returncode == 2


def test_history_page_figures_and_table(tmp_path):
    commits = [(HASHES[i], 1000 * (i + 1), 1.0 + 0.1 * i) for i in range(4)]
    write_results(tmp_path, commits)
    # a second machine with the first two commits
    write_results(tmp_path, commits[:2], machine="other")
    summary = tmp_path / "summary.png"
    p = run(tmp_path, "--last", "3", "--summary", str(summary))
    assert p.returncode == 0, p.stderr
    out = tmp_path / "out"
    assert sorted(os.listdir(out)) == ["bench_x.Speed.png", "bench_y.Other.png", "history.txt",
                                       "index.html"]
    page = (out / "index.html").read_text()
    assert not re.search(r"<script|<link|https?://|src=\"(?!data:image/png;base64,)", page)
    assert page.count('<img class="graph"') == 2
    # families with ratios first; the ratio's panel first in its figure
    assert page.index("bench_x.Speed") < page.index("bench_y.Other")
    for png in ("bench_x.Speed.png", "bench_y.Other.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert summary.read_bytes()[:4] == b"\x89PNG"
    # the table: last 3 commits, oldest first, one row per parameter and machine
    table = p.stdout
    assert (out / "history.txt").read_text() == table
    head = table.splitlines()[0]
    assert [h[:8] for h in HASHES[1:]] == head.split()[2:]
    assert re.search(r"track_speedup_vs_base\(1000\)\s+box\s+4\.4x\s+4\.8x\s+5\.2x", table)
    assert re.search(r"time_thing\(a\)\s+box\s+2us", table)
    assert "time_thing(b)" not in table          # failed everywhere: no row
    assert re.search(r"time_work\s+other\s+909us\s+-\s+-\n", table)
    assert re.search(r"time_work\s+box\s+909us\s+833us\s+769us", table)


def test_older_benchmark_versions_are_left_out(tmp_path):
    write_results(tmp_path, [(HASHES[0], 1000, 1.0), (HASHES[1], 2000, 1.0)], version="v-before")
    p = run(tmp_path, "--text-only")
    assert p.returncode == 0
    assert "older code" in p.stderr
    assert "track_speedup_vs_base" not in p.stdout and "time_work" in p.stdout


def test_goals_read_from_the_sources():
    sys.path.insert(0, os.path.join(ROOT, "asv_bench"))
    try:
        import plot_history
    finally:
        sys.path.pop(0)
    goals = plot_history.load_goals(os.path.join(ROOT, "asv_bench", "benchmarks"))
    assert goals["bench_tracker.TrackerSpeedup.track_speedup_vs_reference"] == {1000: 5.0}
    assert plot_history.goal_for(goals, "bench_tracker.TrackerSpeedup.track_speedup_vs_reference",
                                 "1000") == 5.0
    assert plot_history.goal_for(goals, "bench_tracker.TrackerSpeedup.track_speedup_vs_reference",
                                 "100") is None


def test_readme_block_is_rewritten(tmp_path):
    write_results(tmp_path, [(HASHES[0], 1000, 1.0), (HASHES[1], 2000, 1.2)])
    readme = tmp_path / "README.md"
    readme.write_text("# x\n<!-- history:begin -->\nold\n<!-- history:end -->\ntail\n")
    p = run(tmp_path, "--summary", str(tmp_path / "h.png"), "--readme", str(readme),
            "--command", "STEPS=10 asv_bench/history.sh ALL")
    assert p.returncode == 0, p.stderr
    text = readme.read_text()
    assert "old" not in text and text.endswith("<!-- history:end -->\ntail\n")
    assert "](h.png)" in text and "`STEPS=10 asv_bench/history.sh ALL`" in text
    assert "box (Test CPU, 2 cores, Linux)" in text


def test_readme_without_markers_is_left_alone(tmp_path):
    write_results(tmp_path, [(HASHES[0], 1000, 1.0), (HASHES[1], 2000, 1.2)])
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n")
    p = run(tmp_path, "--summary", str(tmp_path / "h.png"), "--readme", str(readme))
    assert p.returncode == 1 and "history:begin" in p.stderr
    assert readme.read_text() == "# no markers\n"

