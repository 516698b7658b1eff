"""The run directory on disk: ``run.json``, ``requests.jsonl``, ``server_metrics.jsonl``.

Records are plain dicts shaped like :class:`analysis.RequestRecord`, serialised
with orjson and flushed one line at a time, so a crash loses at most the
requests still in flight. The manifest is written at the start with
``complete=false`` and rewritten (atomically) at the end.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import orjson

from analysis import RunManifest, RunWindow

__all__ = ["RunWriter", "close_manifest", "iso_utc"]


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
    if crash is not None:
        manifest.warnings.append(f"run aborted by an internal error: {crash}")


class RunWriter:
    """Appends records and metric samples; rewrites the manifest atomically."""

    def __init__(self, out_dir: Path) -> None:
        self.dir = out_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        self._requests: IO[bytes] = open(out_dir / "requests.jsonl", "wb")  # noqa: SIM115
        self._metrics: IO[bytes] = open(out_dir / "server_metrics.jsonl", "wb")  # noqa: SIM115
        self.records = 0

    def write_manifest(self, manifest: RunManifest) -> None:
        tmp = self.dir / "run.json.tmp"
        tmp.write_bytes(orjson.dumps(manifest.model_dump(mode="json"),
                                     option=orjson.OPT_INDENT_2) + b"\n")
        os.replace(tmp, self.dir / "run.json")

    def write_record(self, record: Mapping[str, object]) -> None:
        self._requests.write(orjson.dumps(record) + b"\n")
        self._requests.flush()
        self.records += 1

    def write_lines(self, lines: list[bytes]) -> None:
        """Append already serialised records (one JSON object each, no newline), as
        workers send them, and flush: a batch arrives when its requests finished."""
        if not lines:
            return
        self._requests.write(b"\n".join(lines) + b"\n")
        self._requests.flush()
        self.records += len(lines)

    def write_metrics(self, t_s: float, values: dict[str, float]) -> None:
        self._metrics.write(orjson.dumps({"t_s": t_s, "values": values}) + b"\n")
        self._metrics.flush()

    def close(self) -> None:
        self._requests.close()
        self._metrics.close()
