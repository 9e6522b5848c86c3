#!/usr/bin/env bash
# dod GPU checks: build dod in place, run the GPU tests, the GPU example and
# the GPU benchmarks, and print the tables.
#
#   tests/gpu/run_gpu_checks.sh [--quick] [--markdown]
#
# Runs from the repository root whatever the current directory. Needs a CUDA
# GPU, CuPy, Cython, numpy, setuptools and pytest; no network. PYTHON selects
# the interpreter (default: python). Exit status 0 only when every step passed.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
PY=${PYTHON:-python}
# The in-place build is imported from the checkout (examples/ run as scripts too).
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
BENCH_ARGS=("$@")
declare -A RC

step() { echo; echo "== $1"; }

step "dod GPU checks, $(date -u '+%Y-%m-%d %H:%M UTC'), $(hostname)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null \
    || echo "(nvidia-smi not available)"
"$PY" - <<'EOF'
import platform, sys
import numpy
print(f"Python {platform.python_version()} ({sys.executable}), numpy {numpy.__version__}")
try:
    import cupy
    rt = cupy.cuda.runtime
    v = rt.runtimeGetVersion()
    print(f"CuPy {cupy.__version__}, CUDA runtime {v // 1000}.{(v % 1000) // 10}, devices: {rt.getDeviceCount()}")
except Exception as e:
    print(f"CuPy not usable: {type(e).__name__}: {e}")
EOF

step "build (python setup.py build_ext --inplace)"
"$PY" setup.py -q build_ext --inplace
RC[build]=$?
if [ "${RC[build]}" -ne 0 ]; then echo "build failed: stopping"; exit 1; fi

step "device usable from dod.cuda"
"$PY" -c "import dod.cuda as c; c.require_device(); print('dod.cuda: CuPy and a CUDA device are usable')"
RC[device]=$?
if [ "${RC[device]}" -ne 0 ]; then echo "no usable device: stopping"; exit 1; fi

step "GPU tests (pytest tests/gpu)"
# --confcutdir keeps tests/conftest.py (hypothesis, the cimport compiler) out:
# the GPU tests need neither, and the GPU machine may lack hypothesis.
"$PY" -m pytest tests/gpu -q -rs -p no:cacheprovider --confcutdir=tests/gpu
RC[gpu-tests]=$?

step "CPU-side dod.cuda tests (tests/test_cuda_cpu.py)"
if "$PY" -c "import hypothesis" 2>/dev/null; then
    "$PY" -m pytest tests/test_cuda_cpu.py -q -p no:cacheprovider
    RC[cpu-tests]=$?
else
    echo "skipped: hypothesis is not installed here"
fi

step "example (python examples/gpu_frame.py)"
"$PY" examples/gpu_frame.py --frames 100
RC[example]=$?

step "benchmarks (python -m dod.cuda.bench ${BENCH_ARGS[*]})"
"$PY" -m dod.cuda.bench "${BENCH_ARGS[@]}"
RC[bench]=$?

step "summary"
status=0
for k in build device gpu-tests cpu-tests example bench; do
    if [ -n "${RC[$k]+x}" ]; then
        if [ "${RC[$k]}" -eq 0 ]; then echo "  $k: ok"; else echo "  $k: FAILED (exit ${RC[$k]})"; status=1; fi
    fi
done
exit $status
