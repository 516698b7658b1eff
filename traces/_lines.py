"""Bounded line reading: no input line may hold more than ``MAX_LINE_BYTES``.

Workload and trace readers stream their files a line at a time; a file with no
newline (``/dev/zero``, a corrupted dump) would otherwise be read whole into
memory. Here the read stops one byte past the limit and the file and line are
named in the error.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

from traces._errors import TraceError

__all__ = ["MAX_LINE_BYTES", "bounded_lines", "bounded_text_lines", "read_line"]

MAX_LINE_BYTES = 16 << 20


def read_line(fh: IO[bytes], file: str, lineno: int) -> bytes:
    """One line (b"" at the end of the file), refused when longer than the limit."""
    raw = fh.readline(MAX_LINE_BYTES + 1)
    if len(raw) > MAX_LINE_BYTES:
        raise TraceError(f"line longer than {MAX_LINE_BYTES >> 20} MiB (not a line-based "
                         "file?)", file=file, line=lineno)
    return raw


def bounded_lines(fh: IO[bytes], file: str, first_line: int = 1) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes) for each line of ``fh``, each within the limit."""
    lineno = first_line
    while raw := read_line(fh, file, lineno):
        yield lineno, raw
        lineno += 1


def bounded_text_lines(fh: IO[bytes], file: str) -> Iterator[str]:
    """Decoded lines (invalid UTF-8 replaced) for text parsers such as ``csv``."""
    for _, raw in bounded_lines(fh, file):
        yield raw.decode("utf-8", errors="replace")
