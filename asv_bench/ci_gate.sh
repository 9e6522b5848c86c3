#!/usr/bin/env bash
# The benchmark regression gate of CI (.ci/run):
#
#   asv_bench/ci_gate.sh                 # HEAD~1 (the previous commit on main) against HEAD
#   asv_bench/ci_gate.sh BASE HEAD       # any two commits
#
# Benchmarks BASE and HEAD on a small, stable subset (the tracker tick at
# N = 1,000 and 10,000, the arena frame, the pool pair and its speedup over
# malloc/free, the arena's speedup, the table's batch insert), each commit
# built in its own asv environment (asv.conf.json), compares them with asv's
# statistics and FACTOR (default 1.5), and prints the comparison table. A
# regression (check_regression.sh decides: speedups read the right way round)
# is not believed at once: the subset is run again for both commits and only
# a regression seen both times is confirmed.
#
# A confirmed regression fails the gate unless the HEAD commit message
# declares it with a trailer, one per regressed benchmark (any part of its
# name, then why):
#
#     Benchmark-Regression: TrackerTick.time_tick: the gating pass costs 20 us; issue 12 needs it
#
# Exit status: 0 no regression (or every one declared), 1 a confirmed,
# undeclared regression, 2 the gate could not run (no previous commit in a
# shallow clone, an asv environment that cannot be built, ...).
# Environment: ASV (the asv command, default `asv`), FACTOR, GATE_BENCH
# (asv -b regexes, space-separated, replacing the subset).
# Offline: asv builds each commit with `pip wheel --no-deps
# --no-build-isolation` in a virtualenv whose pinned toolchain comes from pip's
# configured index (a local wheelhouse here); nothing else is fetched.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
ASV=${ASV:-asv}
FACTOR=${FACTOR:-1.5}
t0=$(date +%s)

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
fi
base=$(git rev-parse -q --verify "${1:-HEAD~1}^{commit}") || {
    echo "ci_gate: no commit '${1:-HEAD~1}' (a shallow clone? fetch with --depth 2 or more)" >&2; exit 2; }
head=$(git rev-parse -q --verify "${2:-HEAD}^{commit}") || {
    echo "ci_gate: no commit '${2:-HEAD}'" >&2; exit 2; }
if [ "$base" = "$head" ]; then
    echo "ci_gate: BASE and HEAD are the same commit (${head:0:8}): nothing to compare"
    exit 0
fi
if [[ ! "$FACTOR" =~ ^[0-9]+([.][0-9]+)?$ ]]; then
    echo "ci_gate: FACTOR must be a number, not '$FACTOR'" >&2; exit 2
fi

# The subset: parameterised benchmarks are matched as name(params) by asv -b.
subset=(
    'TrackerTick\.time_tick\((1000|10000), .dod.\)'
    'ArenaFrame\.time_frames\(.arena.\)'
    'ArenaSpeedup\.track_arena_speedup_vs_malloc'
    'PoolPair\.time_pool_engine_local'
    'PoolPair\.track_speedup_pool_vs_malloc'
    'InsertBatch\.time_table_insert_many'
)
[ -n "${GATE_BENCH:-}" ] && read -r -a subset <<< "$GATE_BENCH"
bargs=()
for b in "${subset[@]}"; do bargs+=(-b "$b"); done

hashes=$(mktemp)
trap 'rm -f "$hashes"' EXIT
printf '%s\n%s\n' "$base" "$head" > "$hashes"

run() {         # $@: extra asv run arguments
    $ASV run --show-stderr --record-samples "$@" "HASHFILE:$hashes" "${bargs[@]}"
    local rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 2 ]; then     # 2: a benchmark raised; the table still says which
        echo "ci_gate: asv run failed ($rc): see above (an environment that cannot be built?)" >&2
        exit 2
    fi
}

compare() {     # prints the table and the verdict; returns check_regression's verdict (0/1)
    local out
    out=$($ASV compare --factor "$FACTOR" --split "$base" "$head") || {
        echo "ci_gate: asv compare failed" >&2; exit 2; }
    echo "$out"
    printf '%s\n' "$out" | "$here/check_regression.sh" --parse "$FACTOR" > "$verdict"
    local rc=$?
    cat "$verdict"
    return $rc
}

$ASV machine --yes >/dev/null || { echo "ci_gate: asv machine failed" >&2; exit 2; }
verdict=$(mktemp)
trap 'rm -f "$hashes" "$verdict"' EXIT
echo "ci_gate: ${base:0:8} (base) against ${head:0:8} (HEAD), factor $FACTOR" >&2
run --skip-existing
if compare; then
    echo "ci_gate: passed ($(( $(date +%s) - t0 )) s)"
    exit 0
fi
echo
echo "ci_gate: a regression: running the subset again for both commits before believing it"
run
if compare; then
    echo "ci_gate: not confirmed by the rerun: passed ($(( $(date +%s) - t0 )) s)"
    exit 0
fi

# Confirmed: every regressed benchmark must be declared in HEAD's message.
declared=$(git log -1 --format='%(trailers:key=Benchmark-Regression,valueonly,separator=%x0A)' "$head")
undeclared=0
while IFS= read -r name; do
    [ -z "$name" ] && continue
    ok=0
    while IFS= read -r line; do
        what=${line%%:*}; why=${line#*:}
        what=$(echo "$what" | xargs); why=$(echo "$why" | xargs)
        if [ -n "$what" ] && [ -n "$why" ] && [ "$line" != "$what" ] && [[ "$name" == *"$what"* ]]; then
            ok=1; echo "ci_gate: declared in ${head:0:8}: $name ($why)"; break
        fi
    done <<< "$declared"
    [ $ok -eq 0 ] && { undeclared=$((undeclared + 1)); echo "ci_gate: NOT declared: $name"; }
done < <(awk -F'|' '/^\|/ { n = $(NF-1); gsub(/^ +| +$/, "", n); print n }' "$verdict")

if [ $undeclared -gt 0 ]; then
    echo "ci_gate: FAILED: $undeclared confirmed regression(s) beyond ${FACTOR}x not declared;" \
         "add 'Benchmark-Regression: <benchmark>: <why>' to the commit message if intended" \
         "($(( $(date +%s) - t0 )) s)"
    exit 1
fi
echo "ci_gate: every confirmed regression is declared: passed ($(( $(date +%s) - t0 )) s)"
exit 0
