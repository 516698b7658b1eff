"""The strict reader of ``requests.jsonl``: slow, but it names the line and field.

Lines are parsed with orjson in batches; required keys and value types are
checked per column (one pass of ``type()`` over a column), and only a batch
that fails the cheap check is walked record by record to find the first bad
value. ``read_run`` uses pyarrow first (``_read_arrow``) and comes here only
when that path refuses the file, so a bad file is always reported exactly.
"""

from __future__ import annotations

import gc
import io
import itertools
from collections.abc import Iterator, Sequence
from operator import itemgetter
from typing import Any

import numpy as np
import orjson

from analysis.schema import (
    CODE_INDEX,
    CODE_LABELS,
    CODED,
    COLUMN_KIND,
    DEFAULTS,
    FIELDS,
    INT,
    KNOWN,
    NONNEGATIVE,
    NUM,
    REQUIRED,
    RequestColumns,
    ResultError,
)

__all__ = ["empty_columns", "strict_columns"]

_Rec = dict[str, Any]

_BATCH_LINES = 20_000
_INT64 = (-(2**63), 2**63 - 1)
_RANGE = range(_INT64[0], _INT64[1] + 1)


def empty_columns() -> RequestColumns:
    """Columns of no records."""
    return _columns_from_batch([], "", 0)


def strict_columns(data: bytes, path: str) -> RequestColumns:
    """Columns of every record in ``data``; raises ResultError naming the first bad
    line and field. Blank lines are skipped (and counted)."""
    # parsed records hold no cycles: the cyclic GC would only rescan them again and
    # again as they pile up (it more than doubles the time of ``orjson.loads``)
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        parts = [_batch_or_locate(values, numbers, path)
                 for values, numbers in _batches(data, path)]
    finally:
        if gc_was_on:
            gc.enable()
    parts = [p for p in parts if len(p)]
    return RequestColumns.concat(parts) if parts else empty_columns()


def _batches(data: bytes, path: str) -> Iterator[tuple[list[_Rec], list[int]]]:
    """(parsed records, their line numbers) per batch of lines."""
    lines = enumerate(io.BytesIO(data), start=1)
    while batch := list(itertools.islice(lines, _BATCH_LINES)):
        values, numbers = [], []
        for lineno, raw in batch:
            if not raw.strip():
                continue
            try:
                values.append(orjson.loads(raw))
            except orjson.JSONDecodeError:
                raise ResultError("not valid JSON", file=path, line=lineno) from None
            numbers.append(lineno)
        yield values, numbers


def _check_types(
    column: list[Any], name: str, allowed: tuple[type, ...], nullable: bool
) -> int | None:
    """Index of the first value of the wrong type, or None (fast path: a set of types)."""
    kinds = set(map(type, column))
    ok = set(allowed) | ({type(None)} if nullable else set())
    if kinds <= ok:
        return None
    for i, v in enumerate(column):
        if type(v) not in ok:
            return i
    return None  # pragma: no cover


def _type_name(allowed: tuple[type, ...], nullable: bool) -> str:
    names = {int: "integer", float: "number", str: "string"}
    shown = [t for t in allowed if not (t is int and float in allowed)]
    text = " or ".join(names[t] for t in shown)
    return text + (" or null" if nullable else "")


def _split_layouts(
    batch: list[_Rec], keys_of: list[tuple[str, ...]], layouts: set[tuple[str, ...]]
) -> list[tuple[set[str], np.ndarray, tuple[_Rec, ...]]]:
    """(keys, record indices, records) per key layout, so that each field is read
    with one ``itemgetter`` pass per layout instead of a ``.get`` per record."""
    index = {k: i for i, k in enumerate(layouts)}
    codes = np.fromiter(map(index.__getitem__, keys_of), dtype=np.int64, count=len(batch))
    out = []
    for k, i in index.items():
        idx = np.flatnonzero(codes == i)
        sub = itemgetter(*idx)(batch) if len(idx) > 1 else (batch[int(idx[0])],)
        out.append((set(k), idx, sub))
    return out


class _Batch:
    """One batch of parsed records as the column checks read it: its key layouts
    (records written by one writer share a few: each is checked once) and the
    error that names a record's line and field."""

    def __init__(self, records: list[_Rec], path: str, first_line: int) -> None:
        self.records, self.path, self.first_line = records, path, first_line
        self.n = len(records)
        if set(map(type, records)) - {dict}:
            i = next(i for i, rec in enumerate(records) if type(rec) is not dict)
            raise self.fail(i, "", "expected a JSON object")
        keys_of = list(map(tuple, records))
        layouts = set(keys_of)
        self.present: set[str] = set().union(*layouts) if layouts else set()
        self.everywhere: set[str] = set.intersection(*map(set, layouts)) if layouts else set()
        self._check_keys(layouts)
        self.by_layout = _split_layouts(records, keys_of, layouts) if len(layouts) > 1 \
            else None

    def fail(self, i: int, name: str, message: str) -> ResultError:
        return ResultError(message, file=self.path, line=self.first_line + i, field=name)

    def _check_keys(self, layouts: set[tuple[str, ...]]) -> None:
        """Every required key present and no unknown one, named at its first record."""
        for keys in layouts:
            ks = set(keys)
            if REQUIRED <= ks <= KNOWN:
                continue
            for i, rec in enumerate(self.records):
                missing = sorted(REQUIRED - rec.keys())
                if missing:
                    raise self.fail(i, missing[0], "required field missing")
                extra = sorted(rec.keys() - KNOWN)
                if extra:
                    raise self.fail(i, extra[0], "unknown field")

    def gather(self, name: str, default: object) -> list[Any]:
        """The field of every record, ``default`` where absent (per layout, no .get)."""
        if name in self.everywhere:
            return list(map(itemgetter(name), self.records))
        if self.by_layout is None:
            return [default] * self.n
        out = np.empty(self.n, dtype=object)
        for ks, idx, sub in self.by_layout:
            if name in ks:
                out[idx] = np.fromiter(map(itemgetter(name), sub), dtype=object, count=len(idx))
            else:
                out[idx] = np.fromiter(itertools.repeat(default, len(idx)), dtype=object,
                                       count=len(idx))
        return out.tolist()


def _columns_from_batch(batch: list[_Rec], path: str, first_line: int) -> RequestColumns:
    """Columns of one batch of parsed records; raises ResultError naming line and field."""
    b = _Batch(batch, path, first_line)
    cols = _scalar_columns(b)
    _check_values(b, cols)
    times, flat = _chunk_lists(b)
    return _to_columns(cols, times, flat, b.n)


def _scalar_columns(b: _Batch) -> dict[str, list[Any]]:
    """Every scalar field as a list, type-checked (``type()`` rejects bools) and
    64-bit-range-checked; absent or null optional fields take their default."""
    cols: dict[str, list[Any]] = {}
    for name, (allowed, required, nullable) in FIELDS.items():
        if name not in b.present:
            cols[name] = [DEFAULTS.get(name)] * b.n  # n == 0 for required fields
            continue
        col = b.gather(name, None if required else DEFAULTS[name])
        if not (required or nullable) and None in col:  # null means absent: the default
            col = [DEFAULTS[name] if v is None else v for v in col]
        bad = _check_types(col, name, allowed, nullable)
        if bad is not None:
            raise b.fail(bad, name, f"expected {_type_name(allowed, nullable)}, got {col[bad]!r}")
        if allowed is INT and col:
            ints = [v for v in col if v is not None] if nullable else col
            if ints and (min(ints) < _INT64[0] or max(ints) > _INT64[1]):
                i = next(i for i, v in enumerate(col) if v is not None and v not in _RANGE)
                raise b.fail(i, name, f"out of range (64-bit integer), got {col[i]!r}")
        cols[name] = col
    return cols


def _check_values(b: _Batch, cols: dict[str, list[Any]]) -> None:
    """Coded fields hold one of their codes; counts and times are not negative."""
    for name, allowed_set in CODED.items():
        if not set(cols[name]) <= set(allowed_set):
            i = next(i for i, v in enumerate(cols[name]) if v not in allowed_set)
            raise b.fail(i, name,
                         f"expected one of {', '.join(allowed_set)}, got {cols[name][i]!r}")
    for name in NONNEGATIVE:
        if b.n and min(cols[name]) < 0:
            i = next(i for i, v in enumerate(cols[name]) if v < 0)
            raise b.fail(i, name, "must be >= 0")


def _chunk_lists(b: _Batch) -> tuple[list[list[Any]], dict[str, list[Any]]]:
    """Each record's chunk times (lists of numbers and integers, as many tokens as
    times; null or absent is no chunk) and both fields flattened, checked."""
    empty: list[Any] = []
    lists: dict[str, list[Any]] = {}
    flat: dict[str, list[Any]] = {}
    for name, allowed in (("chunk_times_s", NUM), ("chunk_tokens", INT)):
        col = b.gather(name, empty) if name in b.present else [empty] * b.n
        if set(map(type, col)) - {list}:
            col = [[] if v is None else v for v in col]
        if set(map(type, col)) - {list}:
            i = next(i for i, v in enumerate(col) if type(v) is not list)
            raise b.fail(i, name, "expected a list")
        flat[name] = _checked_flat(b, name, col, allowed)
        lists[name] = col
    times, toks = lists["chunk_times_s"], lists["chunk_tokens"]
    if list(map(len, times)) != list(map(len, toks)):
        i = next(i for i, (t, k) in enumerate(zip(times, toks, strict=True)) if len(t) != len(k))
        raise b.fail(i, "chunk_tokens", "must have as many entries as chunk_times_s")
    return times, flat


def _checked_flat(b: _Batch, name: str, lists: list[list[Any]],
                  allowed: tuple[type, ...]) -> list[Any]:
    """The lists' values in one list, each of an ``allowed`` type (and in 64-bit range)."""
    flat = list(itertools.chain.from_iterable(lists))
    if _check_types(flat, name, allowed, False) is not None:
        for i, lst in enumerate(lists):
            if _check_types(lst, name, allowed, False) is not None:
                raise b.fail(i, name, f"expected a list of {_type_name(allowed, False)}s")
    if allowed is INT and flat and (min(flat) < _INT64[0] or max(flat) > _INT64[1]):
        i = next(i for i, lst in enumerate(lists) if any(v not in _RANGE for v in lst))
        raise b.fail(i, name, "out of range (64-bit integer)")
    return flat


def _to_columns(cols: dict[str, list[Any]], times: list[list[Any]],
                flat: dict[str, list[Any]], n: int) -> RequestColumns:
    """The checked lists as ``RequestColumns`` arrays (codes, text, counts with -1 for
    none, times with NaN for none; chunks flattened with offsets)."""
    out: dict[str, np.ndarray] = {}
    for name, kind in COLUMN_KIND.items():
        if kind == "coded":
            codes = np.fromiter(map(CODE_INDEX[name].__getitem__, cols[name]), dtype=np.intp,
                                count=n)
            out[name] = CODE_LABELS[name][codes]
        elif kind == "text":
            arr = np.empty(n, dtype=object)
            arr[:] = cols[name]
            out[name] = arr
        elif kind == "count":  # None -> -1
            a = np.array(cols[name], dtype=np.float64)
            out[name] = np.where(np.isnan(a), -1, a).astype(np.int64)
        else:  # time: None -> NaN
            out[name] = np.array(cols[name], dtype=np.float64)
    n_times = np.fromiter(map(len, times), dtype=np.int64, count=n)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(n_times, out=offsets[1:])
    total = int(offsets[-1])
    return RequestColumns(
        **out, chunk_offsets=offsets,
        chunk_times_s=np.fromiter(flat["chunk_times_s"], dtype=np.float64, count=total),
        chunk_tokens=np.fromiter(flat["chunk_tokens"], dtype=np.int64, count=total),
    )


def _batch_or_locate(batch: list[_Rec], lines: Sequence[int], path: str) -> RequestColumns:
    """Columns of a batch; on error, re-raise with the file's line number (blank
    lines make batch index and line number differ)."""
    try:
        return _columns_from_batch(batch, path, 0)
    except ResultError as exc:
        idx = exc.line or 0
        raise ResultError(exc.message, file=path or None, line=lines[idx],
                          field=exc.field) from None


