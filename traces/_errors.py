"""Errors a user can cause with a workload or trace file.

    TraceError                 a bad input file; carries file, line and field
    └── (raised by the reader, the validators and every importer)

The CLI prints ``str(error)`` and exits with code 2; no traceback reaches the user.
"""

from __future__ import annotations

__all__ = ["TraceError"]


class TraceError(Exception):
    """A workload or trace file that cannot be used, located precisely."""

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
        where = self.file or "<input>"
        if self.line is not None:
            where += f":{self.line}"
        if self.field:
            where += f": field '{self.field}'"
        return f"{where}: {self.message}"
