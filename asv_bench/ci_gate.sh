#!/usr/bin/env bash
# The benchmark regression gate of CI (.ci/run):
#
#   asv_bench/ci_gate.sh                 # HEAD~1 (the previous commit on main) against HEAD
#   asv_bench/ci_gate.sh BASE HEAD       # any two commits
#
# Benchmarks BASE and HEAD on a small, stable subset (the tracker tick at
# N = 1,000 and 10,000, the arena frame, the pool pair, the arena's speedup
# over malloc/free, the table's batch insert), compares them
# with asv's statistics (asv compare: 99 % intervals of recorded samples) and
# FACTOR (default 1.5), and prints the comparison table. A regression
# (check_regression.sh decides: speedups read the right way round) is not
# believed at once: the subset is run again for both commits, HEAD first
# this time, and, seen there too, once more BASE first: only a regression
# seen all three times is confirmed. (Timed BASE first both times, a
# machine that slowed down through one CI run made HEAD's tracker tick look
# 1.5x slower twice, a tick that alternating runs on a quiet machine timed
# the same; the pool, whose code had not changed, looked 2.2x slower the
# first time. Timed B H | H B, a slow spell across the middle times HEAD
# slow twice in a row: on a commit that changed only the README, the
# pool's speedup over malloc read 11.2 against 3.9 both times. B H | H B |
# B H needs the spell to skip two BASE runs between HEAD's last two.)
#
# Only a commit that changes what is built or timed is timed: when no file
# under BUILD_INPUTS differs between BASE and HEAD, nothing either commit
# builds or runs differs, and the gate passes without timing. (B H | H B |
# B H was not enough on this kind of machine: on a commit that changed only
# docs/, the pool's speedup over malloc read 3.81, 3.85, 5.51 for HEAD
# against 11.09, 10.73, 10.76 for BASE, the same binaries. Each vCPU
# switches between two speeds ~1.7x apart in spells of seconds:
# pair_pool_local pinned to one vCPU, 15 calls in one process, read 1.7-1.9
# ns a pair, then 2.8-3.1, then back.)
#
# A confirmed regression fails the gate unless the HEAD commit message
# declares it with a trailer, one per regressed benchmark (any part of its
# name, a colon, then why):
#
#     Benchmark-Regression: TrackerTick.time_tick: the gating pass costs 20 us; issue 12 needs it
#
# Exit status: 0 no regression (or every one declared), 1 a confirmed,
# undeclared regression, 2 the gate could not run (no previous commit in a
# shallow clone, a commit that does not build, ...).
#
# Offline by construction: each commit is exported (git archive), built with
# PYTHON's own toolchain (pip wheel --no-deps --no-build-isolation: numpy,
# Cython, setuptools must be installed there, as for any build of dod) and
# installed into a private directory; asv then times it in its `existing`
# environment (PYTHON, with that directory as ASV_PYTHONPATH: asv drops
# PYTHONPATH and sets it from ASV_PYTHONPATH) and stores the
# result under the commit's hash (--set-commit-hash). asv's own virtualenv
# environments are not used: creating one downloads asv_runner and the pinned
# toolchain. Environment: PYTHON (default python3), ASV (default
# "$PYTHON -m asv"), FACTOR, GATE_BENCH (asv -b regexes, space-separated,
# replacing the subset), DOD_BUILD_JOBS (compile jobs).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
PYTHON=${PYTHON:-python3}
py=$($PYTHON -c 'import sys; print(sys.executable)' 2>/dev/null) || py=""    # absolute, before the cd
cd "$here"
ASV=${ASV:-"$py -m asv"}
FACTOR=${FACTOR:-1.5}
t0=$(date +%s)

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$here/$(basename "$0")"     # this header
    exit 0
fi
trim() { local x="${1#"${1%%[![:space:]]*}"}"; printf '%s' "${x%"${x##*[![:space:]]}"}"; }

undeclared() {  # $1 commit; stdin: check_regression's verdict. Returns 1 if a regressed row is undeclared.
    local declared name line what why ok missing=0
    declared=$(git log -1 --format='%(trailers:key=Benchmark-Regression,valueonly,separator=%x0A)' "$1")
    while IFS= read -r name; do
        [ -z "$name" ] && continue
        ok=0
        while IFS= read -r line; do
            [[ "$line" == *:* ]] || continue
            what=$(trim "${line%%:*}"); why=$(trim "${line#*:}")
            if [ -n "$what" ] && [ -n "$why" ] && [[ "$name" == *"$what"* ]]; then
                ok=1; echo "ci_gate: declared in ${1:0:8}: $name ($why)"; break
            fi
        done <<< "$declared"
        [ $ok -eq 0 ] && { missing=1; echo "ci_gate: NOT declared: $name"; }
    done < <(names)
    return $missing
}

names() {       # stdin: verdict rows; stdout: their benchmark names
    awk -F'|' '/^\|/ { n = $(NF-1); gsub(/^ +| +$/, "", n); print n }'
}

confirmed() {   # $1 the first run's verdict; stdin: the rerun's. Prints the rerun's rows that regressed both times.
    local row name
    while IFS= read -r row; do
        [[ "$row" == \|* ]] || continue
        name=$(names <<< "$row")
        names < "$1" | grep -qxF -- "$name" && printf '%s\n' "$row"
    done
    return 0
}

if [ "${1:-}" = "--confirmed" ]; then   # ci_gate.sh --confirmed FIRST_VERDICT < rerun_verdict
    confirmed "$2"
    exit 0
fi
timed_order() { # $1 first|rerun|third: the two commits in the order they are timed
    if [ "$1" = rerun ]; then echo "$head $base"; else echo "$base $head"; fi
}

if [ "${1:-}" = "--order" ]; then       # ci_gate.sh --order first|rerun|third: HEAD~1 and HEAD in timing order
    base=$(git rev-parse -q --verify "HEAD~1^{commit}") && head=$(git rev-parse -q --verify "HEAD^{commit}") \
        || { echo "ci_gate: no HEAD~1" >&2; exit 2; }
    timed_order "${2:-first}"
    exit 0
fi
if [ "${1:-}" = "--declared" ]; then    # ci_gate.sh --declared COMMIT < verdict: the trailer check alone
    c=$(git rev-parse -q --verify "${2:-HEAD}^{commit}") || { echo "ci_gate: no commit '${2:-HEAD}'" >&2; exit 2; }
    undeclared "$c"
    exit $?
fi
base=$(git rev-parse -q --verify "${1:-HEAD~1}^{commit}") || {
    echo "ci_gate: no commit '${1:-HEAD~1}' (a shallow clone? fetch with --depth 2 or more)" >&2; exit 2; }
head=$(git rev-parse -q --verify "${2:-HEAD}^{commit}") || {
    echo "ci_gate: no commit '${2:-HEAD}'" >&2; exit 2; }
if [ "$base" = "$head" ]; then
    echo "ci_gate: BASE and HEAD are the same commit (${head:0:8}): nothing to compare"
    exit 0
fi
# What the wheel is built from and what asv runs; git archive exports both.
BUILD_INPUTS=(dod setup.py pyproject.toml MANIFEST.in asv_bench/benchmarks asv_bench/asv.conf.json)
if git -C "$here/.." diff --quiet "$base" "$head" -- "${BUILD_INPUTS[@]}"; then
    echo "ci_gate: no file that is built or timed differs between ${base:0:8} and ${head:0:8}" \
         "(${BUILD_INPUTS[*]}): nothing to time"
    exit 0
fi
if [[ ! "$FACTOR" =~ ^[0-9]+([.][0-9]+)?$ ]]; then
    echo "ci_gate: FACTOR must be a number, not '$FACTOR'" >&2; exit 2
fi

# The subset: parameterised benchmarks are matched as name(params) by asv -b.
# The pool's speedup over malloc is not in it: it divides two timings taken
# seconds apart, each in its own speed spell, and on binaries built from the
# same pool source it read 12.8, 12.8, 5.1 for BASE against 3.2, 3.4, 3.2
# for HEAD, a confirmed 'regression' all three times; the pool pair's own
# time stays.
subset=(
    'TrackerTick\.time_tick\((1000|10000), .dod.\)'
    'ArenaFrame\.time_frames\(.arena.\)'
    'ArenaSpeedup\.track_arena_speedup_vs_malloc'
    'PoolPair\.time_pool_engine_local'
    'InsertBatch\.time_table_insert_many'
)
[ -n "${GATE_BENCH:-}" ] && read -r -a subset <<< "$GATE_BENCH"
bargs=()
for b in "${subset[@]}"; do bargs+=(-b "$b"); done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
verdict="$work/verdict"
conf="$work/asv.conf.json"
[ -n "$py" ] || { echo "ci_gate: no python '$PYTHON' (set PYTHON)" >&2; exit 2; }

export_tree() {  # $1 commit, $2 an exported and built commit or "": the tree of $1 in $work/src-$1
    local c=$1 from=$2 src="$work/src-$1" changes
    if [ -n "$from" ]; then
        # Incremental: start from $from's built tree (generated C, objects) and
        # write the files that differ, newer than every build output, so that
        # cythonize and build_ext redo exactly what they touch. Not when a
        # header or the build itself changed, or a file went away (stale
        # modules would stay in build/lib): then from scratch.
        changes=$(git -C "$here/.." diff --no-renames --name-status "$from" "$c") || changes="D ?"
        if ! grep -qE '^D|\.h$|(^|/)(setup\.py|pyproject\.toml|setup\.cfg|MANIFEST\.in)$' <<< "$changes"; then
            cp -a "$work/src-$from" "$src" || exit 2
            while IFS=$'\t' read -r _ path; do
                [ -z "$path" ] && continue
                mkdir -p "$src/$(dirname "$path")"
                git -C "$here/.." show "$c:$path" > "$src/$path" || exit 2
            done <<< "$changes"
            echo "ci_gate: ${c:0:8}: built incrementally on ${from:0:8} ($(grep -c . <<< "$changes") files differ)" >&2
            return
        fi
    fi
    mkdir -p "$src" && git -C "$here/.." archive "$c" | tar -x -C "$src" || { echo "ci_gate: cannot export ${c:0:8}" >&2; exit 2; }
}

write_conf() {   # asv.conf.json with absolute paths and branches ["HEAD"]: the gate needs no local "main"
    $py - "$here" "$conf" <<'PY' || { echo "ci_gate: cannot read asv.conf.json with $py (asv installed?)" >&2; exit 2; }
import json, os, sys
from asv import util
here, out = sys.argv[1:]
c = util.load_json(os.path.join(here, "asv.conf.json"), js_comments=True)
for key, default in (("repo", ".."), ("benchmark_dir", "benchmarks"), ("results_dir", "results"),
                     ("env_dir", "env"), ("html_dir", "html")):
    c[key] = os.path.normpath(os.path.join(here, c.get(key, default)))
c["branches"] = ["HEAD"]
with open(out, "w") as f:
    json.dump(c, f)
PY
}

build() {       # $1 commit, $2 a built commit to start from (optional): $1's dod installed into $work/site-$1
    local c=$1 src="$work/src-$1" t=$(date +%s)
    export_tree "$c" "${2:-}"
    if ! $py -m pip wheel -q --no-deps --no-build-isolation -w "$work/wheel-$c" "$src" > "$work/build-$c.log" 2>&1 \
        || ! $py -m pip install -q --no-deps --no-index --target "$work/site-$c" "$work/wheel-$c"/*.whl \
            >> "$work/build-$c.log" 2>&1; then
        tail -30 "$work/build-$c.log" >&2
        echo "ci_gate: ${c:0:8} does not build with $py (numpy, Cython, setuptools installed there?)" >&2
        exit 2
    fi
    local where
    where=$(cd "$work" && PYTHONPATH="$work/site-$c" $py -c 'import dod; print(dod.__file__)' 2>&1)
    if [[ "$where" != "$work/site-$c/"* ]]; then
        echo "ci_gate: the build of ${c:0:8} is not the dod imported ($where)" >&2; exit 2
    fi
    echo "ci_gate: built ${c:0:8} in $(( $(date +%s) - t )) s" >&2
}

run() {         # $1 first|rerun|third (timed_order), then extra asv run arguments; times both commits
    local c rc which=$1
    shift
    for c in $(timed_order "$which"); do
        ASV_PYTHONPATH="$work/site-$c" $ASV run --config "$conf" --environment "existing:$py" --set-commit-hash "$c" \
            --show-stderr --record-samples "$@" "${bargs[@]}"
        rc=$?
        if [ $rc -ne 0 ] && [ $rc -ne 2 ]; then     # 2: a benchmark raised; the table says which
            echo "ci_gate: asv run failed ($rc) for ${c:0:8}: see above" >&2
            exit 2
        fi
    done
}

compare() {     # prints the table and the verdict; returns check_regression's verdict (0/1)
    local out
    out=$($ASV compare --config "$conf" --factor "$FACTOR" --split "$base" "$head") || {
        echo "ci_gate: asv compare failed" >&2; exit 2; }
    # A gate that measured nothing must not pass: dod not importable, every benchmark skipped.
    if ! printf '%s\n' "$out" | awk -F'|' '/^\|/ && $4 ~ /[0-9]/ && $4 !~ /n\/a|failed/ { found = 1 }
                                           END { exit !found }'; then
        printf '%s\n' "$out"
        echo "ci_gate: no benchmark of the subset has a result for ${head:0:8}: see the asv output above" >&2
        exit 2
    fi
    # rows of benchmarks not in the subset (other parameters of a selected one) are n/a on both sides
    printf '%s\n' "$out" | grep -vE '^\| +\| +n/a +\| +n/a +\|'
    printf '%s\n' "$out" | "$here/check_regression.sh" --parse "$FACTOR" > "$verdict"
    local rc=$?
    cat "$verdict"
    return $rc
}

$ASV machine --yes >/dev/null || { echo "ci_gate: asv machine failed ($ASV)" >&2; exit 2; }
echo "ci_gate: ${base:0:8} (base) against ${head:0:8} (HEAD), factor $FACTOR" >&2
write_conf
build "$base"
build "$head" "$base"
run first
if compare; then
    echo "ci_gate: passed ($(( $(date +%s) - t0 )) s)"
    exit 0
fi
# Not believed at once: timed again HEAD first, then (seen again) BASE first;
# $work/seen keeps the benchmarks that regressed in every look so far.
cp "$verdict" "$work/seen"
for look in rerun third; do
    echo
    echo "ci_gate: a regression in every look so far: timing both commits again," \
         "$([ "$look" = rerun ] && echo HEAD || echo BASE) first, before believing it"
    run "$look"
    if compare; then
        echo "ci_gate: not confirmed by the $look run: passed ($(( $(date +%s) - t0 )) s)"
        exit 0
    fi
    confirmed "$work/seen" < "$verdict" > "$work/still"
    if [ ! -s "$work/still" ]; then
        echo "ci_gate: no benchmark regressed in every run (different ones each time: noise): passed" \
             "($(( $(date +%s) - t0 )) s)"
        exit 0
    fi
    mv "$work/still" "$work/seen"
done
echo "ci_gate: regressed in all three runs:"
cat "$work/seen"

# Confirmed: every benchmark that regressed three times must be declared in HEAD's message.
if undeclared "$head" < "$work/seen"; then
    echo "ci_gate: every confirmed regression is declared: passed ($(( $(date +%s) - t0 )) s)"
    exit 0
fi
echo "ci_gate: FAILED: confirmed regression(s) beyond ${FACTOR}x not declared; add" \
     "'Benchmark-Regression: <benchmark>: <why>' to the commit message if intended" \
     "($(( $(date +%s) - t0 )) s)"
exit 1
