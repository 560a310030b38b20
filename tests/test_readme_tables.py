"""The measured numbers of the README and of docs/performance.md are the ones
benchmarks/readme_tables.py computes from the committed CSVs."""

import importlib.util
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def load_script():
    spec = importlib.util.spec_from_file_location("readme_tables", ROOT / "benchmarks" / "readme_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCRIPT = load_script()


@pytest.mark.parametrize("path, block", SCRIPT.blocks().items(), ids=lambda value: getattr(value, "name", ""))
def test_the_measured_block_matches_the_csvs(path, block):
    text = path.read_text()
    assert text == SCRIPT.between(text, block), "run: python benchmarks/readme_tables.py --write"


def test_the_readme_quotes_no_number_outside_its_generated_block():
    """A measured figure (us, GB/s, a ratio, a percentage) belongs between the markers, where the test above checks
    it."""
    readme = (ROOT / "README.md").read_text()
    outside = readme[: readme.index(SCRIPT.BEGIN)] + readme[readme.index(SCRIPT.END) :]
    figures = re.findall(r"\b\d+(?:\.\d+)?\s*(?:us|ms|GB/s|x\b|%)", outside)
    assert not figures, f"measured figures outside the generated block of README.md: {figures}"
