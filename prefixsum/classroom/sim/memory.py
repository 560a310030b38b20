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

Global arrays (the kernel's array arguments) are :class:`GlobalArray` s, which add what blocks
running at the same time (:mod:`.scheduler`) see of each other's stores:

* A global store of one block is invisible to the other blocks until it is *published*: by a
  ``cuda.threadfence()`` (or ``threadfence_system()``) of the thread that stored it, or of any
  thread of its block in a later barrier phase; by an atomic operation on the same element; at
  the latest when the block retires. Until then the other blocks read the element's old
  contents, as they can on a GPU (where the store may still sit in the writer's L1 cache or
  store queue). The writer's own block sees it at once. A block of a one-block launch has no one
  to hide from. Atomics act on memory itself: they are visible at once.
* A thread that has made :data:`POLL_READS` global reads since it last waited or yielded -- it
  loops, and may be polling a flag -- gives the other resident blocks a turn before its next
  read, and so does every atomic operation on global memory and every fence. A poll that finds
  the same state again with no global memory changed in between is how the scheduler tells a
  deadlock.
* Stores through slices (``out[a:b] = ...``) are published at once: only element stores are
  held back.
"""

import sys

import numpy as np

from . import numba_sim
from .errors import NegativeIndexError, kernel_frame, negative_index
from .hooks import Access
from .settings import settings

_STOCK_ATOMIC = numba_sim.FakeCUDAAtomic()
_new_tuple = tuple.__new__

POLL_READS = 32
"""Global reads a thread makes between two turns of the other blocks, at most: a loop that polls
a flag with plain loads lets the other blocks run (and the scheduler see a deadlock) after this
many reads, while a thread that reads a few elements and goes on never yields at a read."""


class Array:
    """A device array inside a simulated kernel: refuses negative indices, names itself in errors.

    ``_root`` is the array a view was taken from (None for that array itself) and ``_rec`` the
    index in the root of a record (a structured array's element), so that the access hook can
    report every access against the root.
    """

    __slots__ = ("_ary", "_name", "_space", "_root", "_rec", "_layout")

    def __init__(self, ary, name, space, root=None, rec=None):
        init = object.__setattr__  # __setattr__ writes record fields
        init(self, "_ary", ary)
        init(self, "_name", name)
        init(self, "_space", space)
        init(self, "_root", root)
        init(self, "_rec", rec)
        init(self, "_layout", None)

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
        if key.__class__ is int and self._root is None and ary.ndim == 1 and 0 <= key < ary.shape[0]:
            return (key,)  # the common access, an int into a whole 1-D array, without the general walk
        parts = key if key.__class__ is tuple else (key,)
        shape = ary.shape
        if len(parts) != len(shape):
            raise IndexError(f"{len(parts)} indices for a {ary.ndim}-dimensional array")
        wrapped = []
        for k, d in zip(parts, shape):
            k = int(k)
            if k < 0:
                k += d
            if not 0 <= k < d:
                raise IndexError("index out of bounds")
            wrapped.append(k)
        if self._root is None:
            return tuple(wrapped)
        # Every access through a view lands here: the view's place in its root is worked out
        # once (numpy's unravel_index costs more than the rest of an access).
        offset, strides, size, dims, c_order = self._layout or self._find_layout()
        for k, s in zip(wrapped, strides):
            offset += k * s
        flat = offset // size
        cell = []
        for d in dims:
            flat, i = divmod(flat, d)
            cell.append(i)
        return tuple(reversed(cell)) if c_order else tuple(cell)

    def _find_layout(self):
        """``(byte offset, byte strides, root item size, root dimensions fastest first, C order)``
        of this view in its root array, kept for the next access."""
        ary, root = self._ary, self._root
        offset = ary.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        c_order = not (root.flags.f_contiguous and not root.flags.c_contiguous)
        layout = (offset, ary.strides, root.itemsize, tuple(reversed(root.shape)) if c_order else root.shape, c_order)
        object.__setattr__(self, "_layout", layout)
        return layout

    def __getattr__(self, attr):
        if attr in Array.__slots__:
            raise AttributeError(attr)
        try:
            value = getattr(self._ary, attr)
        except AttributeError:
            if attr in (self._ary.dtype.names or ()):
                return self[attr]  # record field as attribute, as numba's simulator allows
            # Anything else is missing, as getattr(x, name, default) expects (numba's typeof asks
            # for _numba_type_): indexing by the name would raise IndexError instead.
            raise AttributeError(f"{self._describe()} has no attribute {attr!r}") from None
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
        return numba_sim.FakeShape(self._ary.shape)

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

    def _report(self, key, kind, value, stale=False):
        launch = self._launch
        thread = launch.thread
        frame = kernel_frame(sys._getframe(1))  # the access the kernel made
        root = self._root_array()
        # tuple.__new__ skips the Python-level __new__ that NamedTuple generates: every field is given.
        access = _new_tuple(
            Access,
            (
                launch.name,
                launch.block,
                thread.index,
                self._name,
                self._space,
                self._cell(key),
                kind,
                value,
                thread.phase,
                frame.f_code.co_filename,
                frame.f_lineno,
                root.shape,
                root.dtype,
                stale,
            ),
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


class GlobalArray(Array):
    """A global :class:`Array` of a launch whose blocks run at the same time (see the module's
    docstring): holds back a block's stores from the other blocks until published, and lets a
    polling thread give the other blocks a turn.

    Use the subclass :func:`global_arrays` makes for a launch. ``_cells`` maps an element of the
    root array (its index as the kernel wrote it) to ``(block, old contents)`` while a store of
    ``block`` to it is unpublished; the views of one array share it.
    """

    __slots__ = ("_cells",)
    _launch = None
    _traced = False

    def __init__(self, ary, name, space, root=None, rec=None):
        Array.__init__(self, ary, name, space, root, rec)
        root = ary if root is None else root
        object.__setattr__(self, "_cells", self._launch.unpublished.setdefault(id(root), {}))

    def _key(self, key):
        """The element ``self[key]`` as ``_cells`` knows it, or None for a slice or a field."""
        if self._root is None and self._rec is None:
            if key.__class__ is int:
                return key
            if key.__class__ is tuple:
                return key if all(isinstance(k, (int, np.integer)) for k in key) else None
            return key if isinstance(key, np.integer) else None
        try:
            cell = self._cell(key)
        except (IndexError, TypeError):
            return None
        return cell[0] if len(cell) == 1 else cell

    def __getitem__(self, key):
        value = Array.__getitem__(self, key)
        if isinstance(value, Array):
            return value
        launch = self._launch
        launch.reads += 1
        cell = key if key.__class__ is int and self._root is None else self._key(key)
        if launch.reads > POLL_READS and cell is not None:  # a long run of reads: a loop, a poll
            launch.switch_point(kernel_frame(sys._getframe(1)), (self, key, cell))
            value = Array.__getitem__(self, key)
        stale = False
        if self._cells and cell is not None:
            entry = self._cells.get(cell)
            if entry is not None and entry[0] is not launch.current:
                value, stale = entry[1], True
        if self._traced:
            self._report(key, "read", value, stale)
        return value

    def __setitem__(self, key, value):
        launch = self._launch
        if launch.hiding:
            cell = key if key.__class__ is int and self._root is None else self._key(key)
            if cell is not None:
                block = launch.current
                entry = self._cells.get(cell)
                if entry is None or entry[0] is not block:
                    self._hold_back(key, cell, block, entry)
        launch.version += 1
        if self._traced:
            TracedArray.__setitem__(self, key, value)
        else:
            Array.__setitem__(self, key, value)

    def _hold_back(self, key, cell, block, entry):
        """Keep what the other blocks see of ``cell`` (its contents, or another block's held-back
        old contents) while ``block`` stores to it; an index the store refuses is not kept."""
        if entry is None:
            if key.__class__ is int and key < 0:
                return
            try:
                old = self._ary[key]
            except IndexError:
                return
            if old.__class__ is np.void:  # a record indexes as a view: keep a copy
                old = old.copy()
        else:
            old = entry[1]
        self._cells[cell] = (block, old)
        thread = self._launch.thread
        block.unpublished.append((self._cells, cell, thread.linear, thread.phase))

    def _publish(self, index):
        """Make an unpublished store to the element ``self[index]`` visible (an atomic acts on it)."""
        if self._cells:
            cell = self._key(index)
            if cell is not None and self._cells.pop(cell, None) is not None:
                self._launch.version += 1


def global_arrays(launch, array_class):
    """The :class:`GlobalArray` class of one launch.

    Parameters
    ----------
    launch : scheduler.Launch
        Its running thread, current block, unpublished stores and switch points.
    array_class : type
        The launch's class for shared and local arrays: a traced one makes global accesses
        reported too.
    """
    traced = issubclass(array_class, TracedArray)
    bases = (GlobalArray, array_class) if traced else (GlobalArray,)
    attributes = {"__slots__": (), "_launch": launch, "_traced": traced}
    return type("GlobalArray", bases, attributes)


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
for _name in dir(numba_sim.FakeCUDAAtomic):
    if not _name.startswith("_") and _name != "compare_and_swap":
        setattr(Atomic, _name, _atomic_method(_name))
del _name


def _atomic(array, index, operation):
    if not isinstance(array, Array):
        return operation(array)
    if index.__class__ is not int or index < 0:
        array._check_negative(index)
    is_global = isinstance(array, GlobalArray)
    if is_global:
        array._publish(index)
    try:
        old = operation(array._ary)
    except IndexError as exc:
        raise array._bad_index(index, exc) from None
    new = array._ary[index]
    if isinstance(array, TracedArray):
        array._report(index, "atomic", new)
    if is_global:
        launch = array._launch
        changed = not (old == new)
        if changed:
            launch.version += 1
        poll = None if changed else (array, index, array._key(index))
        launch.switch_point(kernel_frame(sys._getframe(1)), poll)
    return old
