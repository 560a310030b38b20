"""Whole files a hostile class hands in beside its exercise cells (``*.cell``), made from a chapter's
students' version: notebooks malformed so that reading one once stopped the batch for everyone,
and one whose exercise cell is megabytes with 150 refused lines at its top (the grader once spent
72 s on 4 MB of it, twice, outside every limit). ``tests/test_grade_attacks.py`` grades them with the
rest of the class: each ends with its own row, and the batch with grades for everyone.
"""

import copy
import json


def _broken(notebook, change):
    """``notebook`` with its first exercise cell changed by ``change``, as bytes."""
    broken = copy.deepcopy(notebook)
    change(next(cell for cell in broken["cells"] if "exercise_id" in cell.get("metadata", {})))
    return json.dumps(broken).encode()


def malformed(notebook):
    """``{name: (the file's bytes, a word of its row's message)}``: ``notebook`` (as JSON) broken one way each."""
    return {
        "exercise_id_list": (
            _broken(notebook, lambda cell: cell["metadata"].update(exercise_id=["01.serial-scan"])),
            "exercise_id is of type list",
        ),
        "source_int": (_broken(notebook, lambda cell: cell.update(source=5)), "source is of type int"),
        "tags_int": (_broken(notebook, lambda cell: cell["metadata"].update(tags=5)), "tags are of type int"),
        "code_without_source": (_broken(notebook, lambda cell: cell.pop("source")), "without a source"),
        "not_json": (json.dumps(notebook).encode()[:1000], "not a readable notebook"),
    }


def refused_lines(notebook, exercise_id, lines=150, size=4 << 20):
    """``notebook`` with the cell of ``exercise_id`` made ``lines`` refused statements and padding, ``size`` bytes in
    all."""
    broken = copy.deepcopy(notebook)
    cell = next(c for c in broken["cells"] if c.get("metadata", {}).get("exercise_id") == exercise_id)
    head = "x = len([1])\n" * lines
    cell["source"] = head + "# padding\n" * ((size - len(head)) // 10)
    return json.dumps(broken).encode()
