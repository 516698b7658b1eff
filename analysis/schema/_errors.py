"""Errors a user can cause with result files or analysis options.

    ResultError            unreadable or inconsistent run/comparison directory
    └── FairnessError      arms that differ in more than the decode backend

The CLI prints ``str(error)`` and exits with code 2.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["FairnessError", "ResultError"]


class ResultError(Exception):
    """A result file or directory that cannot be analysed, located precisely."""

    def __init__(
        self, message: str, *, file: str | None = None, line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.field = field
        super().__init__(self.__str__())

    def __str__(self) -> str:
        parts = []
        if self.file:
            parts.append(self.file + (f":{self.line}" if self.line is not None else ""))
        if self.field:
            parts.append(f"field '{self.field}'")
        parts.append(self.message)
        return ": ".join(parts)


class FairnessError(ResultError):
    """The arms are not comparable; ``differences`` lists (field, a, b)."""

    def __init__(
        self, message: str, differences: Sequence[tuple[str, object, object]]
    ) -> None:
        self.differences = list(differences)
        super().__init__(message)
