"""Device arrays as simulated threads see them: checked, named in errors, and traced on request.

Every global, shared and local array a kernel touches is wrapped in an :class:`Array`:

* A negative index raises :class:`NegativeIndexError`. numba wraps it as Python does, on a GPU
  as well, so ``x[i - 1]`` at ``i = 0`` silently reads the last element.
  ``allow_negative_indices()`` (or ``with allow_negative_indices(): ...``) permits it;
  ``allow_negative_indices(False)`` restores the check.
* An index outside the array raises IndexError naming the array, its space, dtype and shape.
* An integer too large for the element type is stored wrapped to its width, as a GPU stores it,
  instead of raising OverflowError.
* Views (slices, records, ``reshape`` and the other array methods) stay wrapped, and remember
  the array they view, so that every access is reported against that array.

In a launch with an access hook the arrays are :class:`TracedArray` s, which report every
element access (:mod:`.hooks`); without one they carry no reporting code. ``cuda.atomic``
(:class:`Atomic`) runs numba's operations on checked indices and reports each as one access.
"""
import sys

import numpy as np
from numba.cuda.simulator import kernelapi as _stock_api
from numba.cuda.simulator.cudadrv.devicearray import FakeShape

from .errors import PACKAGE_DIR, NegativeIndexError, negative_index
from .hooks import Access
from .settings import settings

_STOCK_ATOMIC = _stock_api.FakeCUDAAtomic()


class Array:
    """A device array inside a simulated kernel: refuses negative indices, names itself in errors.

    ``_root`` is the array a view was taken from (None for that array itself) and ``_rec`` the
    index in the root of a record (a structured array's element), so that the access hook can
    report every access against the root.
    """

    __slots__ = ("_ary", "_name", "_space", "_root", "_rec")

    def __init__(self, ary, name, space, root=None, rec=None):
        init = object.__setattr__  # __setattr__ writes record fields
        init(self, "_ary", ary)
        init(self, "_name", name)
        init(self, "_space", space)
        init(self, "_root", root)
        init(self, "_rec", rec)

    def __getitem__(self, key):
        if key.__class__ is not int or key < 0:
            self._check_negative(key)
        try:
            value = self._ary[key]
        except IndexError as exc:
            raise self._bad_index(key, exc) from None
        if value.__class__ is np.ndarray or value.__class__ is np.void:
            return self._view(value, key)
        return value

    def __setitem__(self, key, value):
        if key.__class__ is not int or key < 0:
            self._check_negative(key)
        try:
            self._ary[key] = value
        except IndexError as exc:
            raise self._bad_index(key, exc) from None
        except OverflowError:  # numpy refuses a Python int out of range; a GPU keeps the low bits
            self._ary[key] = _wrap_to(self._ary.dtype, value)

    def _check_negative(self, key):
        if not settings.allow_negative:
            for k in key if key.__class__ is tuple else (key,):
                if (k.__class__ is int or isinstance(k, (int, np.integer))) and k < 0:
                    raise NegativeIndexError(self._negative_message(key))

    def _negative_message(self, key):
        try:
            cell = self._cell(key)
        except (IndexError, TypeError):
            cell = None
        return negative_index(self._show(key), self._describe(), self._name, cell)

    def _bad_index(self, key, exc):
        return IndexError(f"{exc}: {self._show(key)} in {self._describe()}")

    def _show(self, key):
        parts = key if key.__class__ is tuple else (key,)
        return f"{self._name}[{', '.join(str(k) for k in parts)}]"

    def _describe(self):
        shape = tuple(int(d) for d in np.shape(self._ary))
        return f"{self._space} array '{self._name}' ({self._ary.dtype}, shape {shape})"

    def _view(self, value, key):
        rec = self._cell(key) if value.__class__ is np.void else None
        return self.__class__(value, self._name, self._space, root=self._root_array(), rec=rec)

    def _root_array(self):
        return self._ary if self._root is None else self._root

    def _cell(self, key):
        """The index in the root array of the element ``self[key]``."""
        if self._rec is not None:
            return self._rec + (key,)
        ary = self._ary
        parts = key if key.__class__ is tuple else (key,)
        if len(parts) != ary.ndim:
            raise IndexError(f"{len(parts)} indices for a {ary.ndim}-dimensional array")
        wrapped = [int(k) + d if k < 0 else int(k) for k, d in zip(parts, ary.shape)]
        if not all(0 <= k < d for k, d in zip(wrapped, ary.shape)):
            raise IndexError("index out of bounds")
        if self._root is None:
            return tuple(wrapped)
        root = self._root
        offset = ary.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        offset += sum(k * s for k, s in zip(wrapped, ary.strides))
        order = "F" if root.flags.f_contiguous and not root.flags.c_contiguous else "C"
        cell = np.unravel_index(offset // root.itemsize, root.shape, order=order)
        return tuple(int(i) for i in cell)

    def __getattr__(self, attr):
        if attr in Array.__slots__:
            raise AttributeError(attr)
        try:
            value = getattr(self._ary, attr)
        except AttributeError:
            return self[attr]  # record field as attribute, as numba's simulator allows
        if value.__class__ is np.ndarray:
            return self._wrap_view(value)
        if callable(value):
            # Methods such as reshape, view or swapaxes return views of this memory: wrap them
            # too, or accesses through them would escape the checks and the access hook.
            def method(*args, **kwargs):
                result = value(*args, **kwargs)
                return self._wrap_view(result) if result.__class__ is np.ndarray else result

            return method
        return value

    def _wrap_view(self, value):
        """``value`` as an array of this class if it views this memory; a copy stays plain."""
        if not np.may_share_memory(value, self._root_array()):
            return value
        return self.__class__(value, self._name, self._space, root=self._root_array())

    def __setattr__(self, attr, value):
        self[attr] = value

    @property
    def shape(self):
        return FakeShape(self._ary.shape)

    def __len__(self):
        return len(self._ary)

    def __iter__(self):
        for i in range(len(self._ary)):
            yield self[i]

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self._ary, dtype)

    def __repr__(self):
        return repr(self._ary)

    def __str__(self):
        return str(self._ary)


class TracedArray(Array):
    """An :class:`Array` that reports every element access to the access hooks of its launch.

    Use the subclass :func:`traced_arrays` makes for a launch; it knows the launch (for the
    block, the thread and its phase) and the callbacks.
    """

    __slots__ = ()
    _launch = None
    _callbacks = ()

    def __getitem__(self, key):
        value = Array.__getitem__(self, key)
        if not isinstance(value, Array):
            self._report(key, "read", value)
        return value

    def __setitem__(self, key, value):
        Array.__setitem__(self, key, value)
        stored = self._ary[key]
        if stored.__class__ is np.ndarray:  # a slice assignment writes every element of a view
            view = self._view(stored, key)
            for index in np.ndindex(stored.shape):
                view._report(index, "write", stored[index])
        else:
            self._report(key, "write", stored)

    def _report(self, key, kind, value):
        launch = self._launch
        thread = launch.thread
        frame = sys._getframe(1)
        while frame.f_code.co_filename.startswith(PACKAGE_DIR):  # the access the kernel made
            frame = frame.f_back
        root = self._root_array()
        access = Access(
            launch.name, launch.block, thread.index, self._name, self._space, self._cell(key),
            kind, value, thread.phase, frame.f_code.co_filename, frame.f_lineno, root.shape,
            root.dtype,
        )
        for callback in self._callbacks:
            callback(access)


def traced_arrays(launch, callbacks):
    """The :class:`TracedArray` class of one launch, whose accesses go to ``callbacks``.

    Parameters
    ----------
    launch : scheduler.Launch
        Read at each access for the kernel's name, the block and the running thread.
    callbacks : tuple of callable
        Each called with an :class:`~.hooks.Access`.
    """
    attributes = {"__slots__": (), "_launch": launch, "_callbacks": callbacks}
    return type("TracedArray", (TracedArray,), attributes)


def _wrap_to(dtype, value):
    """``value`` wrapped to the width of integer ``dtype``, as a GPU stores it."""
    if dtype.kind not in "iu" or not isinstance(value, (int, np.integer)):
        raise OverflowError(f"{value} does not fit {dtype}")
    bits = dtype.itemsize * 8
    return np.array(int(value) & ((1 << bits) - 1), dtype=f"u{dtype.itemsize}").view(dtype)[()]


class Atomic:
    """``cuda.atomic``: numba's operations, on checked indices, reported as one access."""

    def compare_and_swap(self, array, old, val):
        index = (0,) * np.ndim(array._ary if isinstance(array, Array) else array)
        return _atomic(array, index, lambda raw: _STOCK_ATOMIC.compare_and_swap(raw, old, val))


def _atomic_method(name):
    operation = getattr(_STOCK_ATOMIC, name)

    def method(self, array, index, *values):
        return _atomic(array, index, lambda raw: operation(raw, index, *values))

    method.__name__ = name
    return method


# Every operation numba's simulator has (the set varies between numba versions).
for _name in dir(_stock_api.FakeCUDAAtomic):
    if not _name.startswith("_") and _name != "compare_and_swap":
        setattr(Atomic, _name, _atomic_method(_name))
del _name


def _atomic(array, index, operation):
    if not isinstance(array, Array):
        return operation(array)
    if index.__class__ is not int or index < 0:
        array._check_negative(index)
    try:
        old = operation(array._ary)
    except IndexError as exc:
        raise array._bad_index(index, exc) from None
    if isinstance(array, TracedArray):
        array._report(index, "atomic", array._ary[index])
    return old
