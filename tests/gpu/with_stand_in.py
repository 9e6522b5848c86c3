"""Run a module or a script with the host-memory stand-in installed as ``cupy``.

    python tests/gpu/with_stand_in.py -m dod.cuda.bench --quick
    python tests/gpu/with_stand_in.py examples/gpu_frame.py --frames 5
    python tests/gpu/with_stand_in.py -c "import dod.cuda; dod.cuda.require_device()"

For rehearsing tests/gpu/run_gpu_checks.sh (``--stand-in``) on a machine
without a GPU: the commands, their options and their output format are
exercised; the numbers mean nothing (see fake_cupy's docstring).
"""
import os
import runpy
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_cupy  # noqa: E402

sys.modules["cupy"] = fake_cupy
del sys.path[0]

args = sys.argv[1:]
if not args or (args[0] in ("-m", "-c") and len(args) < 2):
    sys.exit(__doc__)
if args[0] == "-c" and len(args) >= 2:
    sys.argv = ["-c"] + args[2:]
    exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__"})
elif args[0] == "-m":
    sys.argv = [args[1]] + args[2:]
    runpy.run_module(args[1], run_name="__main__", alter_sys=True)
else:
    sys.argv = args
    runpy.run_path(args[0], run_name="__main__")
