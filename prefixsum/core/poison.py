"""The poison that marks memory nobody wrote.

A GPU leaves whatever was there before in fresh memory, so a kernel that reads a cell it never
wrote, or a test that looks at an output element no thread wrote, usually sees a plausible
number. The classroom simulator (shared and local memory), the checker (fresh device arrays)
and the tests (outputs) fill such memory with poison instead, so that the mistake shows: NaN for
floating-point types (it never compares equal), True for booleans, and :data:`POISON_BYTE` in
every byte of anything else (``0x5A5A5A5A`` = 1515870810 for ``int32``).
"""

import numpy as np

POISON_BYTE = 0x5A
"""The byte that fills unwritten memory of types that are neither floating-point nor boolean."""


def poison(array):
    """Fill ``array`` with poison, in place.

    Parameters
    ----------
    array : numpy.ndarray
        A contiguous array of any dtype.

    Returns
    -------
    numpy.ndarray
        ``array`` itself.
    """
    kind = array.dtype.kind
    if kind in "fc":
        array.fill(np.nan)
    elif kind == "b":
        array.fill(True)
    else:
        array.reshape(-1).view(np.uint8).fill(POISON_BYTE)
    return array


def poison_value(dtype):
    """The value an element of ``dtype`` reads as when it is poisoned.

    Parameters
    ----------
    dtype : numpy.dtype or anything ``numpy.dtype`` accepts

    Returns
    -------
    numpy scalar
        NaN for floating-point types, True for booleans, else :data:`POISON_BYTE` in every byte.
    """
    return poison(np.empty(1, np.dtype(dtype)))[0]
