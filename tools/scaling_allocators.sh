#!/usr/bin/env bash
# The allocator article's scaling table (issue 13), ready for a 16-core machine:
# every allocator at 1, 2, 4, 8 and 16 threads against its own 1-thread rate,
# CAS retries, L1d misses and metadata, as Markdown.
#
#   tools/scaling_allocators.sh [THREADS] > scaling.md     (THREADS default 1,2,4,8,16)
#
# Run it on an otherwise idle machine with at least as many cores as the
# largest thread count: threads beyond the idle cores are time-sliced, and
# the table then measures the scheduler, not the allocators. The first lines
# record the machine, its load and the exact command.
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS="${1:-1,2,4,8,16}"
PY="${PYTHON:-python}"
echo "uptime: $(uptime)"
echo "cores: $(nproc)"
echo
exec "$PY" -m dod.bench --only concurrent --threads "$THREADS" --markdown
