"""Benchmark results as files: writing a script's CSV, printing its table, reading the committed ones.

The notebooks and the README quote measurements only through :func:`read` and :func:`value`, so
every number in their prose comes from a CSV under ``benchmarks/`` that ``run_gpu.sh`` wrote.
"""

import csv
import os
import pathlib

_REPO = pathlib.Path(__file__).resolve().parents[2]
# where setup.py puts the results in a wheel: a chapter run outside a checkout finds them there
_INSTALLED = pathlib.Path(__file__).resolve().parents[1] / "data"


def write_csv(rows, path):
    """Write ``rows`` (dicts with the same keys) to ``path`` as CSV, making its folder, and say so."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} rows to {path}")


def _cell(value):
    if isinstance(value, float):
        return f"{value:.1f}" if abs(value) >= 100 else f"{value:.3g}"
    return str(value)


def print_table(rows, columns, title=None):
    """Print the ``columns`` of ``rows`` (dicts) as an aligned table: what a script prints last."""
    cells = [[_cell(row[c]) for c in columns] for row in rows]
    widths = [max([len(c), *(len(line[k]) for line in cells)]) for k, c in enumerate(columns)]
    if title:
        print(title)
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    for line in cells:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths)))


def report_wrong(rows, describe):
    """Print ``WRONG: describe(row)`` for each row whose ``correct`` is False; the script's exit status.

    A row whose ``correct`` is None or empty had no check (an idle synchronize, a piece of a call):
    it is neither right nor wrong."""
    wrong = [row for row in rows if row["correct"] is not None and row["correct"] != "" and not row["correct"]]
    for row in wrong:
        print(f"WRONG: {describe(row)}")
    return 1 if wrong else 0


def _number(text):
    """``text`` as an int or a float where it is one (``"nan"`` too), else unchanged."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"True": True, "False": False}.get(text, text)


def path(name):
    """The committed result ``name`` (e.g. ``"tridiag.csv"``), from any working directory.

    Looked for in ``../benchmarks`` and ``benchmarks`` of the working directory (a notebook of a
    checkout runs in ``notebooks/``), then in the checkout this package was imported from, then in
    the installed package's ``prefixsum/data/`` (where ``setup.py`` copies them into the wheel,
    so a student's handout runs in any folder).
    """
    here = pathlib.Path.cwd()
    folders = (here.parent / "benchmarks", here / "benchmarks", _REPO / "benchmarks", _INSTALLED)
    for folder in folders:
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"no benchmark result {name!r} in any of {', '.join(map(str, folders))}")


def read(name, **where):
    """The rows of committed result ``name`` whose columns equal ``where``, numbers as numbers.

    >>> rows = read("tridiag.csv", method="pcr", dtype="float32")  # doctest: +SKIP
    """
    with open(path(name), newline="") as handle:
        rows = [{key: _number(text) for key, text in row.items()} for row in csv.DictReader(handle)]
    unknown = set(where) - set(rows[0]) if rows else set()
    if unknown:
        raise KeyError(f"{name} has no column {sorted(unknown)[0]!r}; its columns: {', '.join(rows[0])}")
    return [row for row in rows if all(row[key] == want for key, want in where.items())]


def value(name, column, **where):
    """``column`` of the one row of ``name`` that matches ``where`` (a KeyError if not exactly one)."""
    rows = read(name, **where)
    if len(rows) != 1:
        raise KeyError(f"{len(rows)} rows of {name} match {where}; expected exactly one")
    return rows[0][column]
