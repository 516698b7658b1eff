"""Errors a user can cause with result files or analysis options.

    ResultError            unreadable or inconsistent run/comparison directory
                           (a ``traces.LocatedError``: FILE:LINE: field 'NAME': message)
    └── FairnessError      arms that differ in more than the decode backend

The CLI prints ``str(error)`` and exits with code 2.
"""

from __future__ import annotations

from collections.abc import Sequence

from traces import LocatedError

__all__ = ["FairnessError", "ResultError"]


class ResultError(LocatedError):
    """A result file or directory that cannot be analysed, located precisely."""


class FairnessError(ResultError):
    """The arms are not comparable; ``differences`` lists (field, a, b)."""

    def __init__(
        self, message: str, differences: Sequence[tuple[str, object, object]]
    ) -> None:
        self.differences = list(differences)
        super().__init__(message)
