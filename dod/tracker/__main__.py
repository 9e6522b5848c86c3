"""``python -m dod.tracker``: the live tracker demo (see :mod:`dod.tracker.demo`)."""
import os
import sys

if __name__ == "__main__":
    # One core per tick thread, set before the demo loads the engine (libgomp
    # reads it then); only when run as a program: a process that imports the
    # demo keeps its threads where they are (dod.tracker.openmp).
    from dod.tracker.openmp import default_binding

    default_binding()

from dod.tracker.demo import main

if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:
        # `python -m dod.tracker | head`: the reader left; exit quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
