"""The README's measured tables are the ones benchmarks/readme_tables.py computes from the committed CSVs."""
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent


def load_script():
    spec = importlib.util.spec_from_file_location("readme_tables", ROOT / "benchmarks" / "readme_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_tables_match_the_csvs():
    script = load_script()
    readme = (ROOT / "README.md").read_text()
    start, end = readme.index(script.BEGIN) + len(script.BEGIN), readme.index(script.END)
    assert readme[start:end].strip() == script.tables().strip(), "run: python benchmarks/readme_tables.py --write"
