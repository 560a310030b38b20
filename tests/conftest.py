"""Test-suite setup: the suite proves correctness on the CUDA simulator (level 1 of the three
levels of proof); PTX compilation (level 2) runs in a child process without the simulator."""
import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import importlib  # noqa: E402
import sys  # noqa: E402
import zlib  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import prefixsum  # noqa: E402,F401


@pytest.fixture
def rng(request):
    """A generator seeded from the test's name: different per test, the same on every run."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture
def ptx_compiler():
    """Require numba-cuda's compiler (libNVVM, NVRTC from ``numba-cuda[cu13]``) for a PTX test.

    Skipped on macOS only, where numba-cuda has no wheels and pyproject.toml leaves it out.
    Everywhere else it is a dependency, so a missing compiler is a broken install: the test fails.
    """
    if sys.platform == "darwin":
        pytest.skip("PTX compilation needs numba-cuda[cu13], which has no macOS wheels")
    try:
        importlib.import_module("cuda.bindings")
    except ImportError as exc:
        pytest.fail(f"PTX compilation needs numba-cuda[cu13] (libNVVM, NVRTC), a dependency on "
                    f"{sys.platform}, but cuda.bindings does not import ({exc}); pip install 'numba-cuda[cu13]'")
