"""Small wording helpers shared by the report and the terminal (no imports: the load
path and the CLI parser use them without the report's machinery)."""

from __future__ import annotations

__all__ = ["plural", "verb"]


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 session``, ``2 sessions``: a count with its noun in agreement.

    ``nouns`` is the plural form when adding an ``s`` is wrong.
    """
    word = noun if count == 1 else (nouns or noun + "s")
    return f"{count} {word}"


def verb(count: int, one: str, many: str) -> str:
    """The verb form agreeing with ``count`` (``was``/``were``, ``is``/``are``)."""
    return one if count == 1 else many
