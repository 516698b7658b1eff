"""Import Azure LLM inference CSV traces: ``TIMESTAMP,ContextTokens,GeneratedTokens``.

Arrivals only: no sessions and no prefix information, so every request is a
one-request session with fresh, unique block ids (no reuse at all) arriving at
its offset from the first row (header ``arrival="timestamps"``).
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from traces._errors import TraceError
from traces._import_common import (
    MAX_REQUEST_TOKENS,
    ChainEncoder,
    Counters,
    IdSpace,
    ImportedTrace,
    require_file,
)
from traces._lines import bounded_text_lines
from traces._models import Session, WorkloadHeader
from traces._scale import make_scaler, scale_params

__all__ = ["import_azure"]

_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


def _int(value: str | None, name: str, file: str, line: int, minimum: int) -> int:
    try:
        n = int(value or "")
    except ValueError:
        raise TraceError(f"not an integer: {value!r}", file=file, line=line, field=name) \
            from None
    if n < minimum:
        raise TraceError(f"must be >= {minimum}, got {n}", file=file, line=line, field=name)
    if n > MAX_REQUEST_TOKENS:
        raise TraceError(f"more than {MAX_REQUEST_TOKENS:,} tokens in one request",
                         file=file, line=line, field=name)
    return n


def _checked(lines: Iterator[str], name: str) -> Iterator[str]:
    """Lines for the csv reader, refusing what it would choke on (NUL bytes)."""
    for lineno, line in enumerate(lines, 1):
        if "\0" in line:
            raise TraceError("contains a NUL byte", file=name, line=lineno)
        yield line


def _rows(reader: Any, name: str) -> Iterator[list[str]]:
    """Rows of a csv reader, with its errors (field too large...) as TraceError."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise TraceError(f"bad CSV ({exc})", file=name, line=reader.line_num + 1) from None
        yield row


def import_azure(path: str | os.PathLike[str], *, max_context: int | None = None,
                 block_size: int = 64, token_scale: float = 1.0) -> ImportedTrace:
    """Stream one-request sessions from an Azure trace CSV."""
    file = Path(path)
    require_file(file, "azure")
    base = WorkloadHeader(
        source="azure", block_size=block_size, arrival="timestamps", max_context=max_context,
        params={"path": file.name, "block_ids": "synthetic, unique",
                **scale_params(token_scale)},
    )
    scaler = make_scaler(token_scale, block_size)

    def sessions(counters: Counters) -> Iterator[Session]:
        name = str(file)
        ids = IdSpace()
        t0: datetime | None = None
        with open(file, "rb") as fh:
            reader = csv.reader(_checked(bounded_text_lines(fh, name), name))
            rows = _rows(reader, name)
            header = next(rows, None)
            if header is None:
                raise TraceError("empty file", file=name, line=1)
            if tuple(h.strip() for h in header[:3]) != _COLUMNS:
                raise TraceError(f"expected columns {','.join(_COLUMNS)}", file=name, line=1,
                                 field="header")
            for row in rows:
                line = reader.line_num
                if not row or not any(c.strip() for c in row):
                    continue
                if len(row) < 3:
                    raise TraceError(f"{len(row)} columns, expected 3", file=name, line=line,
                                     field=_COLUMNS[len(row)])
                try:
                    when = datetime.fromisoformat(row[0].strip())
                except ValueError:
                    raise TraceError(f"not a timestamp: {row[0]!r}", file=name, line=line,
                                     field="TIMESTAMP") from None
                prompt = _int(row[1], "ContextTokens", name, line, 1)
                output = _int(row[2], "GeneratedTokens", name, line, 0)
                if output < 1:
                    output = 1
                    counters.zero_outputs_raised += 1
                if t0 is None:
                    t0 = when
                if (when.tzinfo is None) != (t0.tzinfo is None):
                    raise TraceError("mixes timestamps with and without a time zone",
                                     file=name, line=line, field="TIMESTAMP")
                offset = (when - t0).total_seconds()
                if offset < 0:
                    raise TraceError("timestamp earlier than the first row's", file=name,
                                     line=line, field="TIMESTAMP")
                enc = ChainEncoder(block_size, max_context, counters, scaler=scaler)
                full = ids.fresh(-(-prompt // block_size))
                req = enc.encode(full, prompt, output, arrival_s=offset)
                counters.sessions_compacted += enc.compactions > 0
                yield Session(id=f"r{line}", agent_type="azure", requests=(req,),
                              compactions=enc.compactions)
            if t0 is None:
                raise TraceError("no requests after the header", file=name,
                                 line=max(reader.line_num, 1))

    return ImportedTrace(base, sessions)
