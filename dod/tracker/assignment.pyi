"""Type stubs for dod.tracker.assignment (Cython module)."""
import numpy as np
import numpy.typing as npt

def solve_assignment(cost: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]: ...
