"""No checked notebook cell prints anything that depends on the device (nbval on a GPU).

The analysis is :mod:`notebook_taint`'s; the tests below run it on every jupytext source, and on
small notebooks that show what it reports and what it lets pass.
"""

import pathlib
import re
import textwrap

import pytest
from notebook_taint import PACKAGE_SOURCES, analyse, problems

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parent.parent / "notebooks" / "sources").glob("[0-9][0-9]_*.py"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_checked_cells_print_nothing_device_dependent(path):
    found = problems(path.read_text(), path.name)
    assert not found, "\n".join(
        [
            "checked cells print device-dependent values (move them to a cell marked "
            "# NBVAL_IGNORE_OUTPUT, or print a verdict instead):"
        ]
        + found
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_device_query_of_the_notebooks_is_seen(path):
    """The analysis resolves the spellings the notebooks use (``ps.size_for_device``, ...): else it would pass them."""
    text = path.read_text()
    called = {name for name in PACKAGE_SOURCES if re.search(rf"\b{name}\(", text)}
    seen = {name.rsplit(".", 1)[1] for name in analyse(text, path.name).seen if name.startswith("prefixsum.")}
    assert called <= seen, f"{path.name} calls {sorted(called - seen)}, which the analysis does not see"


# -- the analysis itself, on small notebooks ---------------------------------------------------------
SETUP = """
    # %% tags=["setup"]
    # NBVAL_IGNORE_OUTPUT
    import time

    import numpy as np
    from numba import cuda

    import prefixsum as ps

    n = ps.size_for_device(simulator=5000, gpu=2 ** 24)
    print(n, ps.device_info())
"""


def percent(*cells):
    """A jupytext percent-format notebook: the setup cell above (cell 0, lines 1-11), then ``cells``."""
    return "\n\n".join(textwrap.dedent(cell).strip() for cell in (SETUP,) + cells) + "\n"


def reported_lines(*cells):
    return [int(re.search(r"line (\d+):", p).group(1)) for p in problems(percent(*cells))]


def test_a_tainted_print_in_a_checked_cell_is_reported_with_notebook_cell_and_line():
    found = problems(
        percent("""
        # %%
        x = np.ones(n)
        print(f"n = {len(x)}")
    """),
        "demo.py",
    )
    assert len(found) == 1
    assert found[0].startswith("demo.py, cell 1 (cell-001), line 15: print(")
    assert found[0].endswith("depends on ps.size_for_device at line 10")


@pytest.mark.parametrize(
    "marker",
    [
        "# %%\n# NBVAL_IGNORE_OUTPUT",
        "# %%\n# NBVAL_SKIP",
        '# %% tags=["nbval-ignore-output"]',
        '# %% tags=["nbval-skip"]',
    ],
)
def test_the_same_print_in_an_ignored_cell_is_not(marker):
    assert reported_lines(marker + '\nprint(f"n = {n}")\nn') == []


def test_untainted_prints_and_verdicts_are_not_reported():
    assert (
        reported_lines("""
        # %%
        x = np.random.default_rng(7).integers(-9, 9, n)
        print("equal to the reference:", np.array_equal(ps.scan(x), ps.reference.scan(x)))
        print("within 1e-9:", np.abs(ps.scan(x) - np.cumsum(x)).max() < 1e-9, all(v < n for v in x))
        print(np.random.default_rng(7).integers(-9, 9, 5), len("abc"), [k for k in range(3)])
    """)
        == []
    )


def test_taint_passes_through_tuple_unpacking_and_arithmetic():
    assert reported_lines("""
        # %%
        a, b = ps.size_for_device(1, 2), 3
        m = a * 2
        print(b)
        print(m)
        print(a, 1)
    """) == [17, 18]


def test_a_generator_that_drew_a_device_sized_count_taints_its_later_draws():
    assert reported_lines(
        """
        # %%
        rng = np.random.default_rng(0)
        values = rng.normal(size=n)
    """,
        """
        # %%
        print(np.random.default_rng(1).integers(0, 9, 3))
        print(rng.integers(0, 9, 3))
    """,
    ) == [19]


def test_timings_and_device_queries_are_reported():
    assert reported_lines("""
        # %%
        start = time.perf_counter()
        ps.scan(np.ones(10))
        print(f"{time.perf_counter() - start:.3f} s")
        print(ps.device_info()["name"], cuda.get_current_device().name)
        elapsed = []
        elapsed.append(time.time())
        print(elapsed)
    """) == [16, 17, 20]


def test_loops_comprehensions_and_functions_carry_the_taint():
    assert reported_lines(
        """
        # %%
        sizes = ps.size_for_device((5, 16), (32, 64))
        for k in sizes:
            print(k)
        for label, k in zip(("small", "large"), sizes):
            print(label)
        print([2 * k for k in sizes])
    """,
        """
        # %%
        def show(value):
            print("value:", value)


        def twice():
            return 2 * n


        show(3)
        show(n)
        print(twice())
    """,
    ) == [16, 19, 31, 32]


def test_a_condition_on_a_tainted_value_taints_what_it_assigns():
    assert reported_lines("""
        # %%
        if n > 1000:
            label = "large"
        else:
            label = "small"
        print(label)
    """) == [18]


def test_a_tainted_last_expression_is_reported_unless_silenced():
    assert reported_lines("# %%\nn * 2", "# %%\nn * 2;", "# %%\n_ = n * 2") == [14]


def test_a_name_rebound_to_something_clean_is_clean_again():
    assert (
        reported_lines("""
        # %%
        x = np.ones(n)
        try:
            ps.scan(x, algorithm="none")
        except ValueError as x:
            print(x)
        x = np.ones(3)
        print(x, [n for n in range(3)])
    """)
        == []
    )
