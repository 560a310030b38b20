"""Which attack cells run in the sandbox: those marked ``# hole`` on a line of their own, which
grade_with_hole.py lets through the allow-list (so that the sandbox alone must hold them)."""


def let_through(source):
    """Whether the cell ``source`` is marked ``# hole``."""
    return "\n# hole\n" in f"\n{source}"
