#!/usr/bin/env bash
# Benchmark history: run the asv suite over the project's commits, then
# publish the HTML (asv_bench/html/index.html; `asv preview` serves it).
#
#   asv_bench/history.sh                  # every commit of the configured branch (ALL)
#   asv_bench/history.sh NEW              # commits newer than the newest with results
#   asv_bench/history.sh main~30..main    # a range (git rev-list syntax)
#   asv_bench/history.sh "HEAD^!"         # one commit
#   STEPS=10 asv_bench/history.sh ALL     # 10 commits spread over the history
#   asv_bench/history.sh ALL -b bench_tracker   # extra arguments go to `asv run`
#
# Commits that already have results are skipped benchmark by benchmark
# (--skip-existing), so a rerun only fills in what is missing. Each commit is
# built in its own environment (asv.conf.json: pinned toolchain, pip wheel
# without build isolation); the benchmark suite itself is read from this
# working tree, and benchmarks skip (NotImplementedError) on commits that
# predate what they measure. Environment: ASV (the asv command, default
# `asv`), STEPS (sample this many commits), NO_PUBLISH=1 (skip the HTML),
# PYTHON (runs plot_history.py, default python3), README=1 (also redraw the
# "Benchmark history" figure and block of docs/performance.md from these results).
#
# After `asv publish`, plot_history.py draws the same results into
# html/history/ (index.html works offline: asv's own page loads its scripts
# from the internet) and prints the last commits as a table.
# Exit status: asv run's (2 when a benchmark raised an error), after publishing;
# else plot_history.py's when it fails.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
ASV=${ASV:-asv}
range=${1:-ALL}
[ $# -gt 0 ] && shift
steps=()
[ -n "${STEPS:-}" ] && steps=(--steps "$STEPS")

$ASV machine --yes >/dev/null
echo "asv run ${range} ${steps[*]} $*" >&2
$ASV run --skip-existing --show-stderr "${steps[@]}" "$range" "$@"
rc=$?
if [ -z "${NO_PUBLISH:-}" ]; then
    $ASV publish >&2 && echo "published: $here/html/index.html (serve with: cd $here && $ASV preview)" >&2
    plot=(--out "$here/html/history")
    if [ -n "${README:-}" ]; then
        cmd="${STEPS:+STEPS=$STEPS }asv_bench/history.sh $range"
        for a in "$@"; do cmd+=" $(printf '%q' "$a")"; done
        plot+=(--summary "$here/history.png" --readme "$here/../docs/performance.md" --command "$cmd")
    fi
    ${PYTHON:-python3} "$here/plot_history.py" "${plot[@]}"
    prc=$?
    [ $rc -eq 0 ] && rc=$prc
fi
exit $rc
