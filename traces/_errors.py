"""Errors a user can cause with a workload or trace file.

    LocatedError               the base of every located user error (file, line, field)
    └── TraceError             a bad input file (the reader, validators, importers)

The CLI prints ``str(error)`` and exits with code 2; no traceback reaches the user.
"""

from __future__ import annotations

from typing import NamedTuple, Self

from pydantic import ValidationError

__all__ = ["LocatedError", "Problem", "TraceError", "first_problem"]


class Problem(NamedTuple):
    """The first error of a pydantic validation, in the parts a one-line message needs."""

    field: str | None
    """Its dotted location (``requests.3.output_tokens``); None for the whole model."""
    message: str
    """pydantic's message without its ``Value error, `` prefix."""
    raw: str
    """pydantic's message as it is (what a vLLM-shaped answer repeats)."""
    kind: str
    """pydantic's error type, e.g. ``extra_forbidden``."""
    value: object
    """The input that was refused."""


def first_problem(exc: ValidationError) -> Problem:
    """The one place a pydantic ``ValidationError`` becomes a located message: every
    reader, importer and flag check reports the first error through this."""
    err = exc.errors()[0]
    raw = str(err.get("msg", "invalid value"))
    field = ".".join(str(part) for part in err.get("loc", ())) or None
    return Problem(field, raw.removeprefix("Value error, "), raw, str(err.get("type", "")),
                   err.get("input"))


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

    @classmethod
    def from_validation(cls, exc: ValidationError, *, file: str | None = None,
                        line: int | None = None, within: str | None = None) -> Self:
        """The first error of ``exc`` located in ``file``/``line``; ``within`` prefixes
        its field (the part of the file the validated object came from)."""
        problem = first_problem(exc)
        field = ".".join(p for p in (within, problem.field) if p) or None
        return cls(problem.message, file=file, line=line, field=field)


class TraceError(LocatedError):
    """A workload or trace file that cannot be used, located precisely."""

    where_unknown = "<input>"
