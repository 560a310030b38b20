"""Deprecation paths for names that moved to another module.

A module whose names moved sets ``__getattr__ = moved(__name__, {"old": "package.module:new"})``:
reading ``module.old`` then warns once per name (:class:`DeprecationWarning`, pointing at the
caller's line, which Python shows for code run as ``__main__``, such as a notebook's cell) and
returns the object at its new place. The new module is imported by name when the old name is
first read, so a layer may point at a layer above it (a lesson that moved to ``classroom`` from
``scans``) without importing it: nothing below that layer runs it unless a user's old code asks.
The paths go when the deprecated names do.
"""

import importlib
import warnings


def moved(module_name, targets):
    """A module ``__getattr__`` that resolves the names in ``targets`` at their new places.

    Parameters
    ----------
    module_name : str
        The old module's ``__name__``, for messages.
    targets : dict
        ``{old_name: "new.module:new_name"}``.

    Returns
    -------
    callable
        ``__getattr__(name)``: the moved object, after a DeprecationWarning; AttributeError for
        any other name.
    """

    def __getattr__(name):
        if name not in targets:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        where, _, new_name = targets[name].partition(":")
        warnings.warn(
            f"{module_name}.{name} moved to {where}.{new_name}; the old name will be removed",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(where), new_name)

    return __getattr__
