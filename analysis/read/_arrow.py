"""The fast path for ``requests.jsonl``: pyarrow's JSON reader, straight into columns.

pyarrow parses against an explicit schema (derived from ``RequestRecord``) in
C++ on every core, several times faster than any per-line Python loop (a
million records: ~3 s instead of ~12 s of CPU). It cannot say which *line* of
the file is wrong, so every input it rejects, and every value that fails a check
here, goes back to the strict reader (``_read_strict``), whose message names the
line and field. On every input this path accepts, both give the same columns (a
property test holds them to it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from analysis.schema import (
    CODE_LABELS,
    CODED,
    COLUMN_KIND,
    DEFAULTS,
    FIELDS,
    INT,
    LISTS,
    NONNEGATIVE,
    STR,
    RequestColumns,
)

if TYPE_CHECKING:
    import pyarrow as pa  # type: ignore[import-untyped]

__all__ = ["arrow_columns", "arrow_table", "arrow_schema"]


def arrow_schema() -> pa.Schema:
    """The explicit pyarrow schema of a record line (from ``RequestRecord``)."""
    import pyarrow as pa

    def kind(allowed: tuple[type, ...]) -> pa.DataType:
        return pa.string() if allowed is STR else pa.int64() if allowed is INT else pa.float64()

    fields = [(name, kind(allowed)) for name, (allowed, _, _) in FIELDS.items()]
    fields += [(name, pa.list_(pa.float64() if name == "chunk_times_s" else pa.int64()))
               for name in LISTS]
    return pa.schema(fields)


def arrow_table(data: memoryview) -> pa.Table | None:
    """The records in ``data`` (whole lines) as a table, or None if pyarrow refuses
    them. The table holds no reference to ``data``."""
    import pyarrow as pa
    import pyarrow.json as pj  # type: ignore[import-untyped]

    try:
        table = pj.read_json(
            pa.BufferReader(pa.py_buffer(data)),
            read_options=pj.ReadOptions(block_size=16 << 20),
            parse_options=pj.ParseOptions(explicit_schema=arrow_schema(),
                                          unexpected_field_behavior="error"),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return table.combine_chunks()


def arrow_columns(table: pa.Table | None, lines: int) -> RequestColumns | None:
    """Columns of a table from ``arrow_table``, or None if the strict reader must
    look: there is no table, a value failed a check, or the row count is not
    ``lines`` (blank lines, or two objects on one line)."""
    import pyarrow as pa
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    if table is None or lines == 0 or table.num_rows != lines:
        return None
    col = {name: table.column(name).chunk(0) if table.column(name).num_chunks
           else pa.array([], table.schema.field(name).type) for name in table.column_names}
    if any(col[name].null_count for name, (_, required, _) in FIELDS.items() if required):
        return None
    for name in NONNEGATIVE:
        low = pc.min(col[name]).as_py()
        if low is not None and low < 0:
            return None

    def filled(name: str) -> Any:
        _, required, nullable = FIELDS[name]
        return col[name] if required or nullable else pc.fill_null(col[name], DEFAULTS[name])

    out: dict[str, np.ndarray] = {}
    for name, kind in COLUMN_KIND.items():
        if kind == "coded":
            codes = pc.index_in(filled(name), value_set=pa.array(CODED[name]))
            if codes.null_count:
                return None
            out[name] = CODE_LABELS[name][codes.to_numpy()]
        elif kind == "text":
            out[name] = filled(name).to_numpy(zero_copy_only=False).astype(object, copy=False)
        elif kind == "count":
            out[name] = pc.fill_null(filled(name), -1).to_numpy().astype(np.int64, copy=False)
        else:  # time: null -> NaN
            out[name] = filled(name).to_numpy(zero_copy_only=False).astype(np.float64,
                                                                           copy=False)
    lengths = []
    for name in LISTS:
        lists = col[name]
        flat = lists.flatten()  # null lists hold nothing; a null *inside* one is an error
        if flat.null_count:
            return None
        dtype = np.float64 if name == "chunk_times_s" else np.int64
        out[name] = flat.to_numpy().astype(dtype, copy=False)
        lengths.append(pc.fill_null(pc.list_value_length(lists), 0).to_numpy())
    if not all(np.array_equal(lengths[0], x) for x in lengths[1:]):
        return None
    offsets = np.zeros(len(lengths[0]) + 1, dtype=np.int64)
    np.cumsum(lengths[0], out=offsets[1:])
    return RequestColumns(**out, chunk_offsets=offsets)
