"""Reading run directories into columns: fast, strict, and tolerant of a killed run.

``requests.jsonl`` can hold a million records, so records are never turned into
pydantic objects here: lines are parsed with orjson in batches, required keys
and value types are checked per column (one pass of ``type()`` over a column),
and the columns become numpy arrays. Only when a batch fails the cheap check
are its lines re-examined one by one, to name the exact line and field.

A truncated *last* line is what a killed writer leaves: it is dropped and the
run is flagged incomplete. A malformed line anywhere else is an error.
"""

from __future__ import annotations

import gc
import itertools
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path

import numpy as np
import orjson
from pydantic import ValidationError

from analysis._errors import ResultError
from analysis._schema import MetricSample, RequestRecord, RunManifest

__all__ = [
    "MetricSeries",
    "RequestColumns",
    "RunData",
    "find_run_dirs",
    "read_manifest",
    "read_run",
    "read_runs",
]

MANIFEST = "run.json"
REQUESTS = "requests.jsonl"
SERVER_METRICS = "server_metrics.jsonl"

_STATUSES = ("ok", "error", "timeout", "cancelled")
_PHASES = ("warmup", "measure", "drain")
# checked values become array elements by code: no per-value string conversion
_STATUS_CODE = {v: i for i, v in enumerate(_STATUSES)}
_PHASE_CODE = {v: i for i, v in enumerate(_PHASES)}
_STATUS_ARRAY = np.array(_STATUSES, dtype="<U9")
_PHASE_ARRAY = np.array(_PHASES, dtype="<U7")
_INT = (int,)
_NUM = (int, float)
_STR = (str,)
# field -> (allowed python types, required, nullable)
_FIELDS: dict[str, tuple[tuple[type, ...], bool, bool]] = {
    "id": (_STR, True, False),
    "user": (_INT, True, False),
    "lane": (_STR, False, False),
    "session": (_STR, True, False),
    "session_instance": (_INT, False, False),
    "turn": (_INT, True, False),
    "agent": (_STR, False, True),
    "kind": (_STR, False, False),
    "phase": (_STR, False, False),
    "worker": (_INT, False, False),
    "status": (_STR, True, False),
    "error_kind": (_STR, False, True),
    "error_message": (_STR, False, True),
    "http_status": (_INT, False, True),
    "due_s": (_NUM, True, False),
    "sent_s": (_NUM, True, False),
    "first_token_s": (_NUM, False, True),
    "last_token_s": (_NUM, False, True),
    "prompt_tokens": (_INT, True, False),
    "prompt_tokens_server": (_INT, False, True),
    "output_tokens_asked": (_INT, True, False),
    "output_tokens": (_INT, True, False),
    "cached_tokens": (_INT, False, True),
    "expected_cached_tokens": (_INT, False, True),
    "think_time_s": (_NUM, False, False),
}
_DEFAULTS: dict[str, object] = {
    "lane": "", "session_instance": 0, "agent": None, "kind": "other", "phase": "measure",
    "worker": 0, "error_kind": None, "error_message": None, "http_status": None,
    "first_token_s": None, "last_token_s": None, "prompt_tokens_server": None,
    "cached_tokens": None, "expected_cached_tokens": None, "think_time_s": 0.0,
}
_LISTS = ("chunk_times_s", "chunk_tokens")
# the schema decides which fields exist (fields added to it later are accepted, unread)
_KNOWN = set(RequestRecord.model_fields) | set(_FIELDS) | set(_LISTS)
_REQUIRED = frozenset(k for k, (_, req, _) in _FIELDS.items() if req)


@dataclass(frozen=True)
class RequestColumns:
    """All request records of a run as parallel arrays (one element per record).

    Missing optional numbers are NaN (times) or -1 (token counts); chunk data is
    flat, record ``i`` owning ``chunk_*[chunk_offsets[i]:chunk_offsets[i + 1]]``.
    """

    id: np.ndarray
    user: np.ndarray
    lane: np.ndarray
    session: np.ndarray
    session_instance: np.ndarray
    turn: np.ndarray
    agent: np.ndarray
    kind: np.ndarray
    phase: np.ndarray
    status: np.ndarray
    error_kind: np.ndarray
    error_message: np.ndarray
    http_status: np.ndarray
    due_s: np.ndarray
    sent_s: np.ndarray
    first_token_s: np.ndarray
    last_token_s: np.ndarray
    prompt_tokens: np.ndarray
    prompt_tokens_server: np.ndarray
    output_tokens_asked: np.ndarray
    output_tokens: np.ndarray
    cached_tokens: np.ndarray
    expected_cached_tokens: np.ndarray
    think_time_s: np.ndarray
    chunk_offsets: np.ndarray
    chunk_times_s: np.ndarray
    chunk_tokens: np.ndarray

    def __len__(self) -> int:
        return len(self.sent_s)

    @staticmethod
    def concat(parts: list[RequestColumns]) -> RequestColumns:
        """Join column sets (records in order), fixing the chunk offsets."""
        if len(parts) == 1:
            return parts[0]
        out: dict[str, np.ndarray] = {}
        for name in RequestColumns.__dataclass_fields__:
            if name == "chunk_offsets":
                continue
            out[name] = np.concatenate([getattr(p, name) for p in parts])
        offsets = [np.zeros(1, dtype=np.int64)]
        base = 0
        for p in parts:
            offsets.append(p.chunk_offsets[1:] + base)
            base += int(p.chunk_offsets[-1])
        out["chunk_offsets"] = np.concatenate(offsets)
        return RequestColumns(**out)


@dataclass(frozen=True)
class MetricSeries:
    """The server's ``/metrics`` scrapes: times and one array per metric name
    (NaN where a scrape lacked it). Names are stored without the ``vllm:`` prefix."""

    t_s: np.ndarray
    values: dict[str, np.ndarray]

    def get(self, name: str) -> np.ndarray | None:
        return self.values.get(name.removeprefix("vllm:"))


@dataclass(frozen=True)
class RunData:
    """One run directory, read: manifest, request columns, server metrics."""

    path: str
    manifest: RunManifest
    requests: RequestColumns
    metrics: MetricSeries
    incomplete: bool = False
    reasons: list[str] = field(default_factory=list)
    """Why the run is incomplete (empty when it is complete)."""


def _empty_columns() -> RequestColumns:
    return _columns_from_batch([], "", 0)


def _check_types(
    column: list[object], name: str, allowed: tuple[type, ...], nullable: bool
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
    batch: list[dict], keys_of: list[tuple], layouts: set[tuple]
) -> list[tuple[set[str], np.ndarray, tuple[dict, ...]]]:
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


def _columns_from_batch(batch: list[dict], path: str, first_line: int) -> RequestColumns:
    """Columns of one batch of parsed records; raises ResultError naming line and field."""

    def fail(i: int, name: str, message: str) -> ResultError:
        return ResultError(message, file=path, line=first_line + i, field=name)

    if set(map(type, batch)) - {dict}:
        i = next(i for i, rec in enumerate(batch) if type(rec) is not dict)
        raise fail(i, "", "expected a JSON object")
    # records written by one writer share a few key layouts: check each layout once
    keys_of = list(map(tuple, batch))
    layouts = set(keys_of)
    present: set[str] = set()
    everywhere: set[str] | None = None
    for keys in layouts:
        ks = set(keys)
        present |= ks
        everywhere = ks if everywhere is None else everywhere & ks
        if not (_REQUIRED <= ks and ks <= _KNOWN):
            for i, rec in enumerate(batch):
                missing = sorted(_REQUIRED - rec.keys())
                if missing:
                    raise fail(i, missing[0], "required field missing")
                extra = sorted(rec.keys() - _KNOWN)
                if extra:
                    raise fail(i, extra[0], "unknown field")
    n = len(batch)
    by_layout = _split_layouts(batch, keys_of, layouts) if len(layouts) > 1 else None

    def gather(name: str, default: object) -> list:
        """The field of every record, ``default`` where absent (per layout, no .get)."""
        if by_layout is None:
            if name in present:
                return list(map(itemgetter(name), batch))
            return [default] * n
        out = np.empty(n, dtype=object)
        for ks, idx, sub in by_layout:
            if name in ks:
                out[idx] = np.fromiter(map(itemgetter(name), sub), dtype=object, count=len(idx))
            else:
                out[idx] = np.fromiter(itertools.repeat(default, len(idx)), dtype=object,
                                       count=len(idx))
        return out.tolist()

    cols: dict[str, list] = {}
    for name, (allowed, required, nullable) in _FIELDS.items():
        if name not in present:
            cols[name] = [_DEFAULTS.get(name)] * n  # n == 0 for required fields
            continue
        if required or name in (everywhere or ()):
            col = list(map(itemgetter(name), batch))  # a KeyError is impossible here
        else:
            col = gather(name, _DEFAULTS[name])
        bad = _check_types(col, name, allowed, nullable)  # type() rejects bools
        if bad is not None:
            raise fail(bad, name, f"expected {_type_name(allowed, nullable)}, got {col[bad]!r}")
        cols[name] = col
    for name, allowed_set in (("status", _STATUSES), ("phase", _PHASES)):
        if not set(cols[name]) <= set(allowed_set):
            i = next(i for i, v in enumerate(cols[name]) if v not in allowed_set)
            raise fail(i, name, f"expected one of {', '.join(allowed_set)}, got {cols[name][i]!r}")
    for name in ("user", "turn", "prompt_tokens", "output_tokens_asked", "output_tokens"):
        if batch and min(cols[name]) < 0:
            i = next(i for i, v in enumerate(cols[name]) if v < 0)
            raise fail(i, name, "must be >= 0")

    empty: list = []
    times = gather("chunk_times_s", empty) if "chunk_times_s" in present else [empty] * n
    toks = gather("chunk_tokens", empty) if "chunk_tokens" in present else [empty] * n
    if set(map(type, times)) - {list}:
        times = [v or [] for v in times]
    if set(map(type, toks)) - {list}:
        toks = [v or [] for v in toks]
    flats: dict[str, list] = {}
    for name, lists, allowed in (("chunk_times_s", times, _NUM), ("chunk_tokens", toks, _INT)):
        if set(map(type, lists)) - {list}:
            i = next(i for i, v in enumerate(lists) if type(v) is not list)
            raise fail(i, name, "expected a list")
        flat = list(itertools.chain.from_iterable(lists))
        if _check_types(flat, name, allowed, False) is not None:
            for i, lst in enumerate(lists):
                if _check_types(lst, name, allowed, False) is not None:
                    raise fail(i, name, f"expected a list of {_type_name(allowed, False)}s")
        flats[name] = flat
    n_times = np.fromiter(map(len, times), dtype=np.int64, count=len(batch))
    n_toks = np.fromiter(map(len, toks), dtype=np.int64, count=len(batch))
    if not np.array_equal(n_times, n_toks):
        i = int(np.flatnonzero(n_times != n_toks)[0])
        raise fail(i, "chunk_tokens", "must have as many entries as chunk_times_s")
    total = int(n_times.sum())

    def num(name: str) -> np.ndarray:
        return np.array(cols[name], dtype=np.float64)  # None -> NaN

    def count(name: str) -> np.ndarray:
        a = np.array(cols[name], dtype=np.float64)
        return np.where(np.isnan(a), -1, a).astype(np.int64)

    def obj(name: str) -> np.ndarray:
        arr = np.empty(len(batch), dtype=object)
        arr[:] = cols[name]
        return arr

    offsets = np.zeros(len(batch) + 1, dtype=np.int64)
    np.cumsum(n_times, out=offsets[1:])
    return RequestColumns(
        id=obj("id"),
        user=np.array(cols["user"], dtype=np.int64),
        lane=obj("lane"),
        session=obj("session"),
        session_instance=np.array(cols["session_instance"], dtype=np.int64),
        turn=np.array(cols["turn"], dtype=np.int64),
        agent=obj("agent"),
        kind=obj("kind"),
        phase=_PHASE_ARRAY[np.fromiter(map(_PHASE_CODE.__getitem__, cols["phase"]),
                                       dtype=np.intp, count=n)],
        status=_STATUS_ARRAY[np.fromiter(map(_STATUS_CODE.__getitem__, cols["status"]),
                                         dtype=np.intp, count=n)],
        error_kind=obj("error_kind"),
        error_message=obj("error_message"),
        http_status=count("http_status"),
        due_s=np.array(cols["due_s"], dtype=np.float64),
        sent_s=np.array(cols["sent_s"], dtype=np.float64),
        first_token_s=num("first_token_s"),
        last_token_s=num("last_token_s"),
        prompt_tokens=np.array(cols["prompt_tokens"], dtype=np.int64),
        prompt_tokens_server=count("prompt_tokens_server"),
        output_tokens_asked=np.array(cols["output_tokens_asked"], dtype=np.int64),
        output_tokens=np.array(cols["output_tokens"], dtype=np.int64),
        cached_tokens=count("cached_tokens"),
        expected_cached_tokens=count("expected_cached_tokens"),
        think_time_s=np.array(cols["think_time_s"], dtype=np.float64),
        chunk_offsets=offsets,
        chunk_times_s=np.fromiter(flats["chunk_times_s"], dtype=np.float64, count=total),
        chunk_tokens=np.fromiter(flats["chunk_tokens"], dtype=np.int64, count=total),
    )


def _iter_json_lines(path: Path) -> Iterator[tuple[int, object | None, bool]]:
    """(line number, parsed value or None if unparsable, is last line); blank lines skipped."""
    with open(path, "rb") as f:
        prev: tuple[int, bytes] | None = None
        for lineno, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            if prev is not None:
                yield _parse(*prev, last=False)
            prev = (lineno, raw)
        if prev is not None:
            yield _parse(*prev, last=True)


def _parse(lineno: int, raw: bytes, *, last: bool) -> tuple[int, object | None, bool]:
    try:
        return lineno, orjson.loads(raw), last
    except orjson.JSONDecodeError:
        return lineno, None, last


_BLOCK_BYTES = 8 << 20
_PARALLEL_BYTES = 64 << 20
"""Files larger than this are parsed by one worker process per CPU (at most 4)."""


def _iter_blocks(
    path: Path, start: int = 0, end: int | None = None, block: int = _BLOCK_BYTES
) -> Iterator[tuple[int, list[bytes]]]:
    """(relative number of the first line, lines) per ~8 MB block of bytes [start, end)."""
    with open(path, "rb") as f:
        f.seek(start)
        left = -1 if end is None else end - start
        rest = b""
        lineno = 1
        while True:
            data = f.read(block if left < 0 else min(block, left))
            if left >= 0:
                left -= len(data)
            if not data:
                if rest:
                    yield lineno, [rest]
                return
            buf = rest + data
            cut = buf.rfind(b"\n")
            if cut < 0:
                rest = buf
                continue
            lines = buf[:cut].split(b"\n")
            rest = buf[cut + 1:]
            yield lineno, lines
            lineno += len(lines)


@dataclass
class _Range:
    """What parsing one byte range of requests.jsonl found (line numbers relative)."""

    columns: RequestColumns | None
    lines: int
    records: int
    pending: int | None
    """An unparsable last non-blank line: fatal if any later range holds a line."""
    error: tuple[str, int | None, str | None] | None = None


def _parse_range(
    path: Path, start: int = 0, end: int | None = None, block: int = _BLOCK_BYTES
) -> _Range:
    """Fast path: a whole block of lines through ``orjson.loads`` in one ``map``.
    If that fails, the block is walked line by line: blank lines are skipped and
    an unparsable line is an error unless no non-blank line follows it."""
    # parsed records hold no cycles: the cyclic GC would only rescan them again and
    # again as they pile up (it more than doubles the time of ``orjson.loads``)
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        return _parse_range_body(path, start, end, block)
    finally:
        if gc_was_on:
            gc.enable()


def _parse_range_body(path: Path, start: int, end: int | None, block: int) -> _Range:
    parts: list[RequestColumns] = []
    pending: int | None = None
    n_lines = 0
    try:
        for first, lines in _iter_blocks(path, start, end, block):
            n_lines = first + len(lines) - 1
            values: list = []
            numbers: Sequence[int]
            try:
                if pending is not None:
                    raise orjson.JSONDecodeError("pending", "", 0)
                values = list(map(orjson.loads, lines))
                numbers = range(first, first + len(lines))
            except orjson.JSONDecodeError:
                values, slow = [], []
                for j, raw in enumerate(lines):
                    if not raw.strip():
                        continue
                    if pending is not None:
                        raise ResultError("not valid JSON", line=pending) from None
                    try:
                        values.append(orjson.loads(raw))
                        slow.append(first + j)
                    except orjson.JSONDecodeError:
                        pending = first + j
                numbers = slow
            if values:
                parts.append(_batch_or_locate(values, numbers, ""))
    except ResultError as exc:
        return _Range(None, n_lines, 0, None, (exc.message, exc.line, exc.field))
    cols = RequestColumns.concat(parts) if parts else None
    return _Range(cols, n_lines, 0 if cols is None else len(cols), pending)


def _split_points(path: Path, parts: int) -> list[int]:
    """Byte offsets just after a newline, cutting the file into about equal parts."""
    size = path.stat().st_size
    points = [0]
    with open(path, "rb") as f:
        for k in range(1, parts):
            f.seek(max(size * k // parts, points[-1]))
            f.readline()
            pos = f.tell()
            if pos < size and pos > points[-1]:
                points.append(pos)
    points.append(size)
    return points


def _parse_ranges(path: Path) -> list[_Range]:
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    workers = min(4, os.cpu_count() or 1)
    if workers < 2 or path.stat().st_size < _PARALLEL_BYTES:
        return [_parse_range(path, block=_BLOCK_BYTES)]
    points = _split_points(path, workers)
    # spawn, not fork: the caller may have threads (an event loop's executor)
    with ProcessPoolExecutor(len(points) - 1, mp_context=mp.get_context("spawn")) as pool:
        futures = [pool.submit(_parse_range, path, a, b, _BLOCK_BYTES)
                   for a, b in zip(points[:-1], points[1:], strict=True)]
        return [f.result() for f in futures]


def _read_requests(path: Path) -> tuple[RequestColumns, str | None]:
    """Columns of requests.jsonl and the truncation reason, if its tail was cut."""
    name = str(path)
    ranges = _parse_ranges(path)
    offset = 0
    pending: int | None = None
    parts: list[RequestColumns] = []
    for rg in ranges:
        if rg.error is not None:
            message, line, field = rg.error
            raise ResultError(message, file=name,
                              line=None if line is None else line + offset, field=field)
        if pending is not None and (rg.records or rg.pending is not None):
            raise ResultError("not valid JSON", file=name, line=pending)
        if rg.columns is not None:
            parts.append(rg.columns)
        if rg.pending is not None:
            pending = rg.pending + offset
        offset += rg.lines
    truncated = None
    if pending is not None:
        truncated = f"{path.name}: last line {pending} is truncated (killed run?)"
    if not parts:
        return _empty_columns(), truncated
    return RequestColumns.concat(parts), truncated


def _batch_or_locate(batch: list[dict], lines: Sequence[int], path: str) -> RequestColumns:
    """Columns of a batch; on error, re-raise with the file's line number (blank
    lines make batch index and line number differ)."""
    try:
        return _columns_from_batch(batch, path, 0)
    except ResultError as exc:
        idx = exc.line or 0
        raise ResultError(exc.message, file=path or None, line=lines[idx],
                          field=exc.field) from None


def _read_metrics(path: Path) -> tuple[MetricSeries, str | None]:
    if not path.exists():
        return MetricSeries(np.zeros(0), {}), None
    samples: list[MetricSample] = []
    truncated = None
    for lineno, value, last in _iter_json_lines(path):
        if value is None:
            if last:
                truncated = f"{path.name}: last line {lineno} is truncated"
                break
            raise ResultError("not valid JSON", file=str(path), line=lineno)
        try:
            samples.append(MetricSample.model_validate(value))
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise ResultError(err["msg"], file=str(path), line=lineno, field=loc) from None
    names = sorted({k.removeprefix("vllm:") for s in samples for k in s.values})
    t = np.array([s.t_s for s in samples], dtype=np.float64)
    values: dict[str, np.ndarray] = {}
    for n in names:
        values[n] = np.array(
            [s.values.get(n, s.values.get("vllm:" + n, np.nan)) for s in samples],
            dtype=np.float64,
        )
    order = np.argsort(t, kind="stable")
    return MetricSeries(t[order], {k: v[order] for k, v in values.items()}), truncated


def read_manifest(path: Path) -> RunManifest:
    """The run.json of a run directory, validated."""
    file = path / MANIFEST
    try:
        raw = orjson.loads(file.read_bytes())
    except FileNotFoundError:
        raise ResultError("not a run directory (no run.json)", file=str(path)) from None
    except orjson.JSONDecodeError as exc:
        raise ResultError(f"not valid JSON ({exc})", file=str(file)) from None
    try:
        return RunManifest.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise ResultError(err["msg"], file=str(file), field=loc) from None


def read_run(path: str | os.PathLike[str]) -> RunData:
    """Read one run directory (run.json, requests.jsonl, server_metrics.jsonl)."""
    root = Path(path)
    manifest = read_manifest(root)
    req_path = root / REQUESTS
    if not req_path.exists():
        raise ResultError("missing", file=str(req_path))
    requests, cut = _read_requests(req_path)
    metrics, mcut = _read_metrics(root / SERVER_METRICS)
    reasons: list[str] = []
    if not manifest.complete:
        reasons.append("run.json says the run did not finish (complete is false)")
    if cut:
        reasons.append(cut)
    if mcut:
        reasons.append(mcut)
    return RunData(
        path=str(root), manifest=manifest, requests=requests, metrics=metrics,
        incomplete=bool(reasons), reasons=reasons,
    )


def find_run_dirs(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Run directories named directly or found below comparison directories."""
    found: list[Path] = []
    for p in paths:
        root = Path(p)
        if (root / MANIFEST).is_file():
            found.append(root)
            continue
        if not root.is_dir():
            raise ResultError("no such run or comparison directory", file=str(root))
        below = sorted(
            Path(d) for d, dirs, files in os.walk(root)
            if MANIFEST in files and not any(part.startswith(".") for part in Path(d).parts[-1:])
        )
        if not below:
            raise ResultError("no run directory (with run.json) inside", file=str(root))
        found.extend(below)
    seen: set[Path] = set()
    unique = []
    for d in found:
        key = d.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(d)
    return unique


def read_runs(paths: Iterable[str | os.PathLike[str]]) -> list[RunData]:
    """Read every run named by or found below ``paths``."""
    return [read_run(d) for d in find_run_dirs(paths)]
