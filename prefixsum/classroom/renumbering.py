"""The workbook's earlier chapter names and exercise ids, so that notebooks made before a
renumbering keep their grades and hints.

Chapter 07 was split in two: 07 keeps PCR, CR and Thomas with all three of its exercises, and
the new 08 holds the hybrid that beats cuSPARSE. Chapters 08 to 10 became 09 to 11, their
exercise ids with them (``08.parallel-norm`` is ``09.parallel-norm``). A students' notebook made
before that carries the old names in its metadata (``python -m prefixsum student`` stamps
the chapter and the exercise ids) and in its file name. :func:`renumbered` reads such a
notebook with the current names; the grader and ``ps.hint`` go through it.

An old id is never a current one (``tests/test_renumbering.py`` checks it), so translating the ids of
a notebook that already uses the current names changes nothing.
"""

import copy

CHAPTERS = {"08_householder": "09_householder", "09_lookback": "10_lookback", "10_applications": "11_applications"}
"""``{old chapter name: current chapter name}`` for the chapters that were renamed."""

EXERCISES = {
    "08.householder-reflector": "09.householder-reflector",
    "08.rank-two-update": "09.rank-two-update",
    "08.parallel-norm": "09.parallel-norm",
    "09.chained-handoff": "10.chained-handoff",
    "09.lookback-loop": "10.lookback-loop",
    "09.publish": "10.publish",
    "10.argmax-operator": "11.argmax-operator",
    "10.compact": "11.compact",
    "10.warp-rank": "11.warp-rank",
    "10.radix-pass": "11.radix-pass",
    "10.digit-rank": "11.digit-rank",
}
"""``{old exercise id: current exercise id}``."""


def exercise_id(name):
    """The current id of exercise ``name`` (itself when it is current)."""
    return EXERCISES.get(name, name)


def chapter_name(name):
    """The current name of a chapter, or of a file stem that starts with an old chapter's name
    (``08_householder-ann`` -> ``09_householder-ann``); anything else unchanged."""
    for old, new in CHAPTERS.items():
        if name == old or name.startswith(old):
            return new + name[len(old) :]
    return name


def renumbered(notebook, *, in_place=False):
    """A copy of ``notebook`` (``notebook`` itself if ``in_place``) with the current chapter names
    and exercise ids in its metadata."""
    if not in_place:
        notebook = copy.deepcopy(notebook)
    for cell in notebook.get("cells", []):
        metadata = cell.get("metadata", {})
        if isinstance(metadata.get("exercise_id"), str):
            metadata["exercise_id"] = exercise_id(metadata["exercise_id"])
    stamp = notebook.get("metadata", {}).get("prefixsum")
    if isinstance(stamp, dict):
        if isinstance(stamp.get("chapter"), str):
            stamp["chapter"] = chapter_name(stamp["chapter"])
        if isinstance(stamp.get("exercises"), list):
            stamp["exercises"] = [exercise_id(e) if isinstance(e, str) else e for e in stamp["exercises"]]
    return notebook


__all__ = ["CHAPTERS", "EXERCISES", "chapter_name", "exercise_id", "renumbered"]
