#!/usr/bin/env bash
# Regression check between two commits, for CI on demand:
#
#   asv_bench/check_regression.sh BASE HEAD [FACTOR] [asv run arguments...]
#   asv_bench/check_regression.sh main HEAD 1.2 -b bench_tracker
#
# Benchmarks BASE and HEAD (each built in its own environment; results
# already stored for a commit are reused), prints `asv compare` between them,
# and exits 1 when a benchmark of HEAD is worse than BASE by more than FACTOR
# (default 1.2, i.e. 20 %) beyond asv's statistical noise test, or fails
# where BASE passed; 0 otherwise; 2 when the run itself failed.
#
# Direction: asv treats bigger as worse for every benchmark. That is right
# for time_* and for track_* counts of cost (ms, ns per op, allocations per
# tick), and wrong for ratios where bigger is better: track_* names with
# "speedup" in them are read the other way round here (a drop beyond FACTOR
# is the regression). `asv compare` itself always exits 0, so its table is
# parsed (rows marked + or !, or - for speedups).
#
# Environment: ASV (the asv command), COMPARE_ARGS (extra `asv compare`
# arguments, e.g. --no-stats to judge by the ratio alone).
# `check_regression.sh --parse FACTOR < compare-output` only reads a table.
set -uo pipefail

regressions() {   # stdin: asv compare output; stdout: the regressed rows
    awk -F'|' '
        !/^\|/ { next }
        { mark = $2; name = $(NF-1); gsub(/ /, "", mark) }
        mark == "!"                                   { print; next }
        mark == "+" && name !~ /speedup/              { print; next }
        mark == "-" && name ~ /speedup/               { print; next }'
}

report() {        # $1 compare output, $2 factor, $3 base, $4 head
    local bad
    bad=$(printf '%s\n' "$1" | regressions)
    if [ -n "$bad" ]; then
        echo
        echo "REGRESSION: $(printf '%s\n' "$bad" | wc -l) benchmark(s) of ${4:0:8} worse than ${3:0:8} by more than ${2}x:"
        printf '%s\n' "$bad"
        return 1
    fi
    echo
    echo "no regression beyond ${2}x between ${3:0:8} and ${4:0:8}"
    return 0
}

if [ "${1:-}" = "--parse" ]; then
    report "$(cat)" "${2:-?}" BASE HEAD
    exit $?
fi
if [ $# -lt 2 ]; then
    sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
ASV=${ASV:-asv}
base=$(git -C "$here" rev-parse --verify "$1^{commit}") || exit 2
head=$(git -C "$here" rev-parse --verify "$2^{commit}") || exit 2
factor=${3:-1.2}
if ! [[ "$factor" =~ ^[0-9]+([.][0-9]+)?$ ]]; then
    echo "check_regression: FACTOR must be a number (give it before asv arguments), not '$factor'" >&2
    exit 2
fi
shift 2
[ $# -gt 0 ] && shift
cd "$here"
hashes=$(mktemp)
trap 'rm -f "$hashes"' EXIT
printf '%s\n%s\n' "$base" "$head" > "$hashes"

$ASV machine --yes >/dev/null
$ASV run --skip-existing --show-stderr "HASHFILE:$hashes" "$@"
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 2 ]; then      # 2: some benchmark raised; compare still meaningful
    echo "check_regression: asv run failed ($rc)" >&2
    exit 2
fi
out=$($ASV compare --factor "$factor" --split ${COMPARE_ARGS:-} "$base" "$head") || exit 2
echo "$out"
report "$out" "$factor" "$base" "$head"
