"""Test-suite setup: the suite proves correctness on the CUDA simulator (level 1 of the three
levels of proof); PTX compilation (level 2) runs in a child process without the simulator."""
import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import zlib  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import prefixsum  # noqa: E402,F401


@pytest.fixture
def rng(request):
    """A generator seeded from the test's name: different per test, the same on every run."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))
