"""The run directory on disk: ``run.json``, ``requests.jsonl``, ``server_metrics.jsonl``.

Records are plain dicts shaped like :class:`analysis.RequestRecord`, serialised
with orjson and written one line per system call (files unbuffered), so a crash
loses at most the requests still in flight. The manifest is written at the start
with ``complete=false`` and rewritten (atomically) at the end.

A write that fails (a full disk, a quota, a dead device) is cut back to the last
complete line, remembered as :attr:`RunWriter.failure` and raised as a
:class:`RunWriteError` (an ``OSError``: the CLI prints one line, exit 4); the
lanes that hit it stop the run, later record writes raise the same error, and the
closing manifest says why the run is incomplete.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from io import FileIO
from pathlib import Path

import orjson

from analysis import RunData, RunManifest, read_run, split_metric_values
from analysis.schema import RunWindow
from replay.errors import ConfigError

__all__ = ["RESULT_FILES", "RunWriteError", "RunWriter", "check_writable_dir", "claim_run_dir",
           "close_manifest", "iso_utc"]

RESULT_FILES = ("run.json", "run.json.tmp", "requests.jsonl", "server_metrics.jsonl",
                "gpu_metrics.jsonl",
                "summary.json", "summary.schema.json", "report.html", "requests.csv",
                "levels.csv")
"""What a run directory holds: what ``--force`` removes before a new run."""


def claim_run_dir(out: Path, *, force: bool, flag: str = "--out") -> None:
    """Check, before any server is asked anything, that a run may be written to
    ``out``: a finished (or crashed) run there is never silently replaced; with
    ``force`` its files are removed first, so nothing stale stays beside the new run.
    """
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{flag} {out}: exists and is not a directory")
    held = [name for name in ("run.json", "requests.jsonl") if (out / name).exists()]
    if held and not force:
        raise ConfigError(f"{flag} {out} already holds a run ({held[0]}); choose another "
                          f"{flag}, or pass --force to replace it")
    if force:
        for name in RESULT_FILES:
            try:
                (out / name).unlink(missing_ok=True)
            except OSError as exc:
                raise ConfigError(f"{flag} {out}: cannot remove the old {name} "
                                  f"({exc.strerror or exc})") from None
    check_writable_dir(out, flag)


def check_writable_dir(out: Path, flag: str = "--out") -> None:
    """Create ``out`` if needed and prove a file can be written in it; else one line
    naming the flag (exit 2) instead of a traceback after the work is done."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{flag} {out}: exists and is not a directory")
    probe = out / f".agentreplay-probe-{os.getpid()}"
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(f"{flag} {out}: cannot write there ({exc.strerror or exc})") \
            from None


def iso_utc(dt: datetime) -> str:
    """ISO 8601 with a ``Z`` suffix: the wall-time label of run manifests."""
    return dt.isoformat().replace("+00:00", "Z")


def close_manifest(manifest: RunManifest, *, warmup_s: float, duration_s: float,
                   interrupted: bool, crash: str | None) -> None:
    """Mark a run finished; one rule for single-process and worker runs alike."""
    manifest.window = RunWindow(start_s=warmup_s, end_s=warmup_s + duration_s)
    manifest.finished_at = iso_utc(datetime.now(UTC))
    manifest.interrupted = interrupted
    manifest.complete = crash is None
    if crash is not None and not crash.startswith(RunWriteError.__name__):
        # (a write failure is described by RunWriter.write_manifest instead)
        manifest.warnings.append(f"run aborted by an internal error: {crash}")


class RunWriteError(OSError):
    """A result file could not be written; its errno and file name are the cause's."""


def _open_raw(path: Path) -> FileIO:
    """An unbuffered file for appending lines (tests replace it to inject faults)."""
    return FileIO(path, "w")


class _Lines:
    """One append-only JSONL file that only ever holds complete lines."""

    __slots__ = ("fh", "good", "path")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fh = _open_raw(path)
        self.good = 0
        """Bytes up to the end of the last line written whole."""

    def append(self, data: bytes) -> None:
        done = 0
        try:
            while done < len(data):
                n = self.fh.write(data[done:] if done else data)
                if not n:
                    raise OSError(errno.EIO, "the file took no bytes")
                done += n
        except OSError as exc:
            self.cut()
            raise RunWriteError(exc.errno, exc.strerror, str(self.path)) from exc
        self.good += len(data)

    def cut(self) -> None:
        """Drop a half-written line (best effort: the disk may refuse that too)."""
        try:
            os.ftruncate(self.fh.fileno(), self.good)
            self.fh.seek(self.good)
        except OSError:
            pass

    def close(self) -> None:
        self.fh.close()


class RunWriter:
    """Appends records and metric samples; rewrites the manifest atomically."""

    def __init__(self, out_dir: Path) -> None:
        self.dir = out_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        self._requests = _Lines(out_dir / "requests.jsonl")
        self._metrics = _Lines(out_dir / "server_metrics.jsonl")
        self._gpu: _Lines | None = None
        """``gpu_metrics.jsonl``, opened at the first GPU sample (``--gpu-metrics``)."""
        self.records = 0
        self.failure: RunWriteError | None = None
        """The first write that failed; the run's results stop there."""

    def write_manifest(self, manifest: RunManifest) -> None:
        """Replace ``run.json`` atomically; after a failed write the manifest says so
        (and a manifest the full disk refuses too leaves the first one, incomplete)."""
        if self.failure is not None:
            _mark_failed(manifest, self.failure)
        tmp = self.dir / "run.json.tmp"
        try:
            tmp.write_bytes(orjson.dumps(manifest.model_dump(mode="json"),
                                         option=orjson.OPT_INDENT_2) + b"\n")
            os.replace(tmp, self.dir / "run.json")
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            if self.failure is None:
                self.failure = RunWriteError(exc.errno, exc.strerror, str(tmp))
                raise self.failure from exc

    def write_record(self, record: Mapping[str, object]) -> None:
        self._append(self._requests, orjson.dumps(record) + b"\n")
        self.records += 1

    def write_lines(self, lines: list[bytes]) -> None:
        """Append already serialised records (one JSON object each, no newline), as
        workers send them: a batch arrives when its requests finished."""
        if not lines:
            return
        self._append(self._requests, b"\n".join(lines) + b"\n")
        self.records += len(lines)

    def write_metrics(self, t_s: float, values: dict[str, float], replica: int = 0) -> None:
        """Append a sample (of a fleet's ``replica``); after a failed write samples are
        dropped (the records' writes, which stop the run, raise instead). A non-finite,
        negative or absurd value is kept as missing, named in ``dropped``
        (:func:`analysis.split_metric_values`): never stored as if true, nor as a
        ``null`` the reader would refuse."""
        if self.failure is None:
            kept, dropped = split_metric_values(values)
            sample: dict[str, object] = {"t_s": t_s, "values": kept}
            if replica:
                sample["replica"] = replica
            if dropped:
                sample["dropped"] = dropped
            self._append(self._metrics, orjson.dumps(sample) + b"\n")

    def write_gpu(self, t_s: float, values: dict[str, float], source: int = 0) -> None:
        """Append a DCGM exporter's sample (``source``: which ``--gpu-metrics`` URL, as
        ``replica``); dropped after a failed write, as ``/metrics`` samples are."""
        if self.failure is None:
            if self._gpu is None:
                self._gpu = _Lines(self.dir / "gpu_metrics.jsonl")
            sample: dict[str, object] = {"t_s": t_s, "values": values}
            if source:
                sample["replica"] = source
            self._append(self._gpu, orjson.dumps(sample) + b"\n")

    def _append(self, lines: _Lines, data: bytes) -> None:
        if self.failure is not None:
            raise self.failure
        try:
            lines.append(data)
        except RunWriteError as exc:
            self.failure = exc
            raise

    def close(self) -> None:
        self._requests.close()
        self._metrics.close()
        if self._gpu is not None:
            self._gpu.close()

    def read(self) -> RunData:
        """The run as written (once closed): its records read back once, at the close."""
        return read_run(self.dir)


def _mark_failed(manifest: RunManifest, failure: RunWriteError) -> None:
    manifest.complete = False
    where = Path(failure.filename).name if failure.filename else "a result file"
    note = f"run stopped: {where} could not be written ({failure.strerror})"
    if note not in manifest.warnings:
        manifest.warnings.append(note)
