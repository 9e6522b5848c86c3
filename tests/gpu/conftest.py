"""GPU tests. With DOD_FAKE_CUPY=1 they run against tests/gpu/fake_cupy.py
(host memory, kernels re-implemented in Python): a check of dod.cuda's
Python logic and of the tests themselves on machines without a GPU, never a
substitute for the real run (tests/gpu/run_gpu_checks.sh)."""
import os
import sys

if os.environ.get("DOD_FAKE_CUPY") == "1":
    sys.path.insert(0, os.path.dirname(__file__))
    import fake_cupy

    sys.modules["cupy"] = fake_cupy
