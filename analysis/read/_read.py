"""Reading run directories into columns: fast, strict, and tolerant of a killed run.

``requests.jsonl`` can hold a million records, so records are never turned into
pydantic objects: pyarrow parses the file against an explicit schema into
columns (``_read_arrow``), and only a file it refuses is read again by the strict
reader (``_read_strict``), which names the exact line and field that is wrong.

A truncated *last* line is what a killed writer leaves: it is dropped and the
run is flagged incomplete. A malformed line anywhere else is an error.
"""

from __future__ import annotations

import mmap
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import orjson
from pydantic import ValidationError

from analysis.read._arrow import arrow_columns, arrow_table
from analysis.read._strict import empty_columns, strict_columns
from analysis.schema import MetricSample, RequestColumns, ResultError, RunManifest

__all__ = [
    "MetricSeries",
    "RequestColumns",
    "RunData",
    "find_run_dirs",
    "metric_series",
    "read_manifest",
    "read_run",
    "read_runs",
    "run_data",
]

MANIFEST = "run.json"
REQUESTS = "requests.jsonl"
SERVER_METRICS = "server_metrics.jsonl"
GPU_METRICS = "gpu_metrics.jsonl"

@dataclass(frozen=True)
class MetricSeries:
    """The server's ``/metrics`` scrapes: times and one array per metric name
    (NaN where a scrape lacked it). Names are stored without the ``vllm:`` prefix."""

    t_s: np.ndarray
    values: dict[str, np.ndarray]
    replica: np.ndarray | None = None
    """Which replica each scrape came from (None: all from one server). Counters of
    different replicas are never differenced against each other: use :meth:`split`."""
    dropped: dict[str, int] = field(default_factory=dict)
    """Metric name (with its prefix) -> scrapes whose value was not believable
    (non-finite, negative, absurd: ``MetricSample.dropped``), kept as missing (NaN)."""

    def get(self, name: str) -> np.ndarray | None:
        return self.values.get(name.removeprefix("vllm:"))

    def split(self) -> list[MetricSeries]:
        """One series per replica (just this one for a single server)."""
        if self.replica is None:
            return [self]
        return [MetricSeries(self.t_s[m], {k: v[m] for k, v in self.values.items()})
                for m in (self.replica == k for k in np.unique(self.replica))]


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
    gpu: MetricSeries | None = None
    """The DCGM exporters' samples (``gpu_metrics.jsonl``; ``replica`` says which
    exporter); None when the run scraped none."""

    def with_manifest(self, manifest: RunManifest) -> RunData:
        """The same records and scrapes under ``manifest`` (a run's closing one, when
        its records were read before it was written): whether it finished is its own."""
        cuts = [r for r in self.reasons if r != _NOT_FINISHED]
        reasons = _reasons(manifest, cuts)
        return replace(self, manifest=manifest, incomplete=bool(reasons), reasons=reasons)


_NOT_FINISHED = "run.json says the run did not finish (complete is false)"


def _reasons(manifest: RunManifest, cuts: Iterable[str | None]) -> list[str]:
    """Why a run is incomplete: its manifest says so, or a file's tail was cut."""
    head = [] if manifest.complete else [_NOT_FINISHED]
    return head + [c for c in cuts if c]


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


def _last_line(data: mmap.mmap) -> tuple[int, int]:
    """Byte range of the last non-blank line ((0, 0) if there is none)."""
    end = len(data)
    while end > 0:
        start = data.rfind(b"\n", 0, end) + 1
        if data[start:end].strip():
            return start, end
        end = start - 1
    return 0, 0


def _count_lines(data: mmap.mmap, end: int) -> int:
    """Lines in ``data[:end]`` (a last line without a newline counts)."""
    step = 64 << 20
    n = sum(data[i:min(i + step, end)].count(b"\n") for i in range(0, end, step))
    return n + (end > 0 and data[end - 1:end] != b"\n")


def _read_requests(path: Path) -> tuple[RequestColumns, str | None]:
    """Columns of requests.jsonl and the truncation reason, if its tail was cut.

    A last line that is not JSON is what a killed writer leaves: it is left out
    and reported. Everything before it goes to pyarrow; the strict reader runs
    only when pyarrow refuses it, to name the bad line and field.
    """
    if path.stat().st_size == 0:
        return empty_columns(), None
    with open(path, "rb") as f:
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        start, end = _last_line(data)
        truncated = None
        try:
            orjson.loads(data[start:end])
        except orjson.JSONDecodeError:
            line = _count_lines(data, start) + 1
            truncated = f"{path.name}: last line {line} is truncated (killed run?)"
            end = start
        lines = _count_lines(data, end)
        view = memoryview(data)[:end]
        try:
            table = arrow_table(view) if lines else None
        finally:
            view.release()
    finally:
        data.close()  # the file's pages leave this process before the columns are built
    cols = arrow_columns(table, lines)
    if cols is None:
        with open(path, "rb") as f:
            cols = strict_columns(f.read(end), str(path))
    return cols, truncated


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
            raise ResultError.from_validation(exc, file=str(path), line=lineno) from None
    return metric_series(samples), truncated


def metric_series(samples: Sequence[MetricSample]) -> MetricSeries:
    """Scrapes as columns: times in order, one array per name (NaN where missing)."""
    names = sorted({k.removeprefix("vllm:") for s in samples for k in s.values})
    t = np.array([s.t_s for s in samples], dtype=np.float64)
    values: dict[str, np.ndarray] = {}
    for n in names:
        values[n] = np.array(
            [s.values.get(n, s.values.get("vllm:" + n, np.nan)) for s in samples],
            dtype=np.float64,
        )
    order = np.argsort(t, kind="stable")
    rep = np.array([s.replica for s in samples], dtype=np.int64)
    replica = rep[order] if rep.size and rep.max() > 0 else None
    dropped = Counter(name for s in samples for name in s.dropped)
    return MetricSeries(t[order], {k: v[order] for k, v in values.items()},
                        replica, dict(sorted(dropped.items())))


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
        raise ResultError.from_validation(exc, file=str(file)) from None


def read_run(path: str | os.PathLike[str]) -> RunData:
    """Read one run directory (run.json, requests.jsonl, server_metrics.jsonl)."""
    root = Path(path)
    manifest = read_manifest(root)
    req_path = root / REQUESTS
    if not req_path.exists():
        raise ResultError("missing", file=str(req_path))
    requests, cut = _read_requests(req_path)
    metrics, mcut = _read_metrics(root / SERVER_METRICS)
    gpu_path = root / GPU_METRICS
    gpu, gcut = _read_metrics(gpu_path) if gpu_path.exists() else (None, None)
    reasons = _reasons(manifest, (cut, mcut, gcut))
    return RunData(
        path=str(root), manifest=manifest, requests=requests, metrics=metrics,
        incomplete=bool(reasons), reasons=reasons, gpu=gpu,
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


def run_data(manifest: RunManifest, requests: bytes, metrics: Sequence[MetricSample],
             path: str = "") -> RunData:
    """A run held in memory, as :func:`read_run` would read it from files holding these
    bytes (``requests``: the JSON lines of ``requests.jsonl``) and scrapes: the twin
    hands its records to the analysis this way instead of through a directory."""
    lines = requests.count(b"\n") + (bool(requests) and not requests.endswith(b"\n"))
    cols = None
    if lines:
        view = memoryview(requests)
        try:
            cols = arrow_columns(arrow_table(view), lines)
        finally:
            view.release()
    else:
        cols = empty_columns()
    if cols is None:
        cols = strict_columns(requests, path or "requests")
    reasons = _reasons(manifest, ())
    return RunData(path=path, manifest=manifest, requests=cols, metrics=metric_series(metrics),
                   incomplete=bool(reasons), reasons=reasons)
