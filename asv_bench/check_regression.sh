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
set -uo pipefail
if [ $# -lt 2 ]; then
    sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
ASV=${ASV:-asv}
base=$(git -C "$here" rev-parse --verify "$1^{commit}") || exit 2
head=$(git -C "$here" rev-parse --verify "$2^{commit}") || exit 2
factor=${3:-1.2}
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
out=$($ASV compare --factor "$factor" --split "$base" "$head")
echo "$out"
# Table rows: "| MARK | before | after | ratio | name |" (asv 0.6), or "MARK before after ratio name".
bad=$(printf '%s\n' "$out" | awk -F'|' '
    /^\|/ { mark = $2; name = $(NF-1) }
    !/^\|/ { next }
    { gsub(/ /, "", mark) }
    mark == "!"                                   { print; next }
    mark == "+" && name !~ /speedup/              { print; next }
    mark == "-" && name ~ /speedup/               { print; next }')
if [ -n "$bad" ]; then
    echo
    echo "REGRESSION: $(printf '%s\n' "$bad" | wc -l) benchmark(s) of ${head:0:8} worse than ${base:0:8} by more than ${factor}x:"
    printf '%s\n' "$bad"
    exit 1
fi
echo
echo "no regression beyond ${factor}x between ${base:0:8} and ${head:0:8}"
exit 0
