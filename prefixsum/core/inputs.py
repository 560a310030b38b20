"""The one check of an array argument, with one wording, for every public call.

Every public call (the scans, the applications; the tridiagonal solvers can take it over) takes
its arrays through :func:`as_input`, which answers whether the argument is on the device and
gives it in the form the kernels read, or refuses it before anything is copied or launched with
one of these messages:

* dtype: the family's own check (``check``), e.g. "unsupported dtype 'float16'; allowed dtypes:
  int32, ..."; a mask or flags (``mask=True``): "mask must be bool or integers; got dtype float32";
* byte order: a numpy array in the other byte order is converted to this machine's (as numpy's
  own functions accept it; the caller's array is untouched), a device array is refused ("unsupported
  byte order: dtype '>f8' is big-endian (float64) ...");
* dimensions: "x must be 1-D; got an array of shape (2, 3) (ndim=2)" (or "1-D or 2-D" where the
  call takes both);
* contiguity: a device array must be contiguous ("a device array x must be contiguous; got
  strides (16,) for elements of 8 bytes; copy it first ..."); a numpy array is copied as it is
  read, so any layout does;
* kind: anything with ``__cuda_array_interface__`` (CuPy, PyTorch, numba) is a device array;
  anything else goes through ``numpy.asarray`` (lists too).
"""

import sys

import numpy as np
from numba import cuda

from .numba_gpu import NUMBA_ARRAY_MARK


def as_input(x, name="x", *, check=None, mask=False, ndim=1):
    """``(array, on_device)``: the argument ``x`` checked, as numba's device array or a numpy array.

    Parameters
    ----------
    x : numpy.ndarray, array-like or device array
        The argument. Never modified.
    name : str
        Its name in messages.
    check : callable, optional
        ``check(dtype)`` returns the dtype or raises TypeError naming it and the allowed ones
        (e.g. :func:`prefixsum.primitives.ops.check_dtype`). None: any dtype.
    mask : bool
        A mask or flags: bool or any integer dtype (nonzero is set), whatever ``check`` says.
    ndim : int or tuple of int
        The dimensions allowed.

    Returns
    -------
    (numba device array or numpy.ndarray, bool)
        The device array (contiguous, this machine's byte order) and True, or the numpy array in
        this machine's byte order (not yet contiguous) and False.

    Raises
    ------
    TypeError
        A dtype ``check`` refuses, a mask neither bool nor integers, or a device array in the
        other byte order.
    ValueError
        The wrong number of dimensions, or a device array that is not contiguous.
    """
    numba_array = getattr(x, NUMBA_ARRAY_MARK, False)  # numba's own (its is_cuda_ndarray, read here without a call)
    on_device = numba_array or hasattr(x, "__cuda_array_interface__")
    if on_device:
        x = x if numba_array else cuda.as_cuda_array(x)
    else:
        x = np.asarray(x)
        if not x.dtype.isnative:
            x = x.astype(x.dtype.newbyteorder("="))
    dtype = np.dtype(x.dtype)
    if mask:
        check_mask_dtype(dtype, name)
    elif check is not None:
        check(dtype)
    if on_device and not dtype.isnative and dtype.itemsize > 1:
        order = "big" if dtype.byteorder == ">" else "little"
        raise TypeError(
            f"unsupported byte order: dtype {dtype.str!r} is {order}-endian ({dtype.name}), but kernels "
            f"work in this machine's {sys.byteorder}-endian order; convert it first"
        )
    allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
    if len(x.shape) not in allowed:
        dims = " or ".join(f"{k}-D" for k in allowed)
        raise ValueError(f"{name} must be {dims}; got an array of shape {tuple(x.shape)} (ndim={len(x.shape)})")
    if on_device and not x.is_c_contiguous():
        raise ValueError(
            f"a device array {name} must be contiguous; got strides {tuple(x.strides)} for elements of "
            f"{dtype.itemsize} bytes; copy it first (e.g. cupy.ascontiguousarray)"
        )
    return x, on_device


def check_mask_dtype(dtype, name="mask"):
    """Raise TypeError unless ``dtype`` is bool or an integer type: what a mask or flags may be."""
    dtype = np.dtype(dtype)
    if dtype != np.bool_ and dtype.kind not in "iu":
        raise TypeError(f"{name} must be bool or integers; got dtype {dtype.name}")
    return dtype


def same_length(arrays, names):
    """Raise ValueError unless the 1-D ``arrays`` (named ``names``) have one length; return it."""
    lengths = [a.shape[0] for a in arrays]
    if len(set(lengths)) > 1:
        raise ValueError(f"{' and '.join(names)} must have one length; got {' and '.join(map(str, lengths))}")
    return lengths[0]
