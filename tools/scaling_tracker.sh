#!/usr/bin/env bash
# The tracker's tick at 1, 2, 4, 8 and 16 threads, N up to 1,000,000: the
# table for a many-core machine (issue 12). Run from the repository root after
# an in-place build:
#
#     tools/scaling_tracker.sh                 # threads 1,2,4,8,16; N 10k,100k,1M
#     THREADS=1,2,4 SIZES=1000,100000 SCANS=40 tools/scaling_tracker.sh
#
# One bench process per N (a size that runs out of memory or time loses only
# its own rows); the reference tracker is left out (hours at 1M). Each N also
# prints where its tick goes, pass by pass, with the workers' waits
# (--passes: the serial parts and the imbalance). Markdown on
# stdout, ready for the README. OMP_WAIT_POLICY defaults to ACTIVE here (a
# dedicated machine: spinning workers answer fastest); PYTHON picks the
# interpreter (default: python3, or .venv/bin/python when present).
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-1,2,4,8,16}
SIZES=${SIZES:-10000,100000,1000000}
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-ACTIVE}
echo "## tracker tick scaling: threads $THREADS, N $SIZES ($(nproc) cores, $(uptime | sed 's/.*load/load/'))"
echo
for n in ${SIZES//,/ }; do
    more=()
    if [ -n "${SCANS:-}" ]; then more=(--scans "$SCANS"); fi
    "$PY" -m dod.tracker.bench --no-reference --markdown --passes --threads "$THREADS" --sizes "$n" "${more[@]}"
    echo
done
