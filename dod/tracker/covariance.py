"""The tracker's packed covariances, for numpy.

The track table's P column stores each covariance once: the upper triangle
of the symmetric n x n matrix, row by row (the order of np.triu_indices(n)),
n (n + 1) / 2 values (10 in 2-D, 21 in 3-D). A matrix stored once is
symmetric by construction, and the rows are smaller (10 values instead of
16 in 2-D): at 100,000 targets the tick streams them from memory
(dod/tracker/kalman.pxd).
"""
import math

import numpy as np

__all__ = ["unpack_covariance", "pack_covariance"]


def _order(m):
    """n of a packed covariance of m values (m = n (n + 1) / 2), or ValueError."""
    n = (math.isqrt(8 * m + 1) - 1) // 2
    if m < 1 or n * (n + 1) // 2 != m:
        raise ValueError(f"a packed covariance has n (n + 1) / 2 values (1, 3, 6, 10, 15, 21, ...), not {m}")
    return n


def unpack_covariance(packed):
    """Full symmetric matrices from packed covariances, as the track table's P column stores them.

    Parameters
    ----------
    packed : array_like
        Shape (..., n (n + 1) / 2): upper triangles, row by row.

    Returns
    -------
    numpy.ndarray
        A new array of shape (..., n, n).

    Raises
    ------
    ValueError
        For a scalar, or a last axis that is not a triangular number.

    Notes
    -----
    Thread-safety: a pure function.
    """
    p = np.asarray(packed)
    if p.ndim < 1:
        raise ValueError("a packed covariance needs at least one axis")
    n = _order(p.shape[-1])
    i, j = np.triu_indices(n)
    out = np.empty(p.shape[:-1] + (n, n), dtype=p.dtype)
    out[..., i, j] = p
    out[..., j, i] = p
    return out


def pack_covariance(full):
    """The packed upper triangles of symmetric matrices: what the track table's P column stores.

    The inverse of :func:`unpack_covariance` (the strictly lower triangle is
    not read).

    Parameters
    ----------
    full : array_like
        Shape (..., n, n).

    Returns
    -------
    numpy.ndarray
        A new array of shape (..., n (n + 1) / 2).

    Raises
    ------
    ValueError
        For arrays that are not square matrices.

    Notes
    -----
    Thread-safety: a pure function.
    """
    P = np.asarray(full)
    if P.ndim < 2 or P.shape[-1] != P.shape[-2]:
        raise ValueError(f"pack_covariance needs square matrices (..., n, n), got shape {P.shape}")
    i, j = np.triu_indices(P.shape[-1])
    return P[..., i, j]
