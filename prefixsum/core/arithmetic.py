"""Arithmetic as a GPU does it: numpy's warnings for overflow and invalid values silenced.

On the simulator the kernels' arithmetic is numpy's, and so is the reference's; numpy warns where
a GPU is silent: float overflow to inf, integer overflow (which wraps), and inf - inf or 0 * inf
giving NaN ("invalid value encountered").
"""

import numpy as np


def quiet_arithmetic(**also):
    """A ``np.errstate`` in which numpy computes as a GPU does, without a RuntimeWarning.

    Parameters
    ----------
    **also
        Further ``np.errstate`` settings (the simulator raises on division by zero in kernels
        compiled with ``debug=True``, as numba's does).
    """
    return np.errstate(over="ignore", invalid="ignore", **also)
