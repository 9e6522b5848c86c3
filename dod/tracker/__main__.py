"""``python -m dod.tracker``: the live tracker demo (see :mod:`dod.tracker.demo`)."""
import os
import sys

from dod.tracker.demo import main

if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:
        # `python -m dod.tracker | head`: the reader left; exit quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
