"""Errors a user can cause with a workload or trace file.

    LocatedError               the base of every located user error (file, line, field)
    └── TraceError             a bad input file (the reader, validators, importers)

The CLI prints ``str(error)`` and exits with code 2; no traceback reaches the user.
"""

from __future__ import annotations

__all__ = ["LocatedError", "TraceError"]


class LocatedError(Exception):
    """A user's input that cannot be used, located precisely: the one base of the
    located errors (``TraceError`` here, ``analysis.ResultError`` for result files), so
    every one of them reads ``FILE:LINE: field 'NAME': message`` and the CLI catches one
    class."""

    where_unknown: str | None = None
    """What stands for the file when none is known (None: nothing)."""

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
        where = self.file or self.where_unknown
        if where:
            parts.append(where + (f":{self.line}" if self.line is not None else ""))
        if self.field:
            parts.append(f"field '{self.field}'")
        parts.append(self.message)
        return ": ".join(parts)


class TraceError(LocatedError):
    """A workload or trace file that cannot be used, located precisely."""

    where_unknown = "<input>"
