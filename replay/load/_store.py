"""Where a run's records go: the :class:`RecordStore` Protocol and its in-memory store.

A run writes its manifest, records and scrapes to a store and, once the lanes are
done, reads them back once (:meth:`RecordStore.read`) for the close's analysis.
:class:`~replay.load._writer.RunWriter` is the store of a run directory (records
appended as they finish, so a crash loses only the requests in flight);
:class:`MemoryStore` keeps them in this process, for the twin's levels, whose
records are handed to ``analysis`` as the bytes ``requests.jsonl`` would hold
(``analysis.run_data``) instead of through a temporary directory.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

import orjson

from analysis import RunData, RunManifest
from analysis.read import run_data
from analysis.schema import MetricSample

__all__ = ["MemoryStore", "RecordStore"]


class RecordStore(Protocol):
    """What a run writes its results to and reads them back from."""

    records: int
    """Records stored so far."""

    def write_manifest(self, manifest: RunManifest) -> None: ...

    def write_record(self, record: Mapping[str, object]) -> None: ...

    def write_lines(self, lines: list[bytes]) -> None: ...

    def write_metrics(self, t_s: float, values: dict[str, float], replica: int = 0) -> None: ...

    def write_gpu(self, t_s: float, values: dict[str, float], source: int = 0) -> None: ...

    def close(self) -> None: ...

    def read(self) -> RunData:
        """The run as stored (records, scrapes, the manifest last written)."""
        ...


class MemoryStore:
    """A run's results in memory, serialised as a run directory would hold them."""

    def __init__(self, label: str = "(in memory)") -> None:
        self.dir = Path(label)
        self.manifest: RunManifest | None = None
        self.records = 0
        self._lines: list[bytes] = []
        self._samples: list[MetricSample] = []

    def write_manifest(self, manifest: RunManifest) -> None:
        self.manifest = manifest

    def write_record(self, record: Mapping[str, object]) -> None:
        self._lines.append(orjson.dumps(record))
        self.records += 1

    def write_lines(self, lines: list[bytes]) -> None:
        self._lines.extend(lines)
        self.records += len(lines)

    def write_metrics(self, t_s: float, values: dict[str, float], replica: int = 0) -> None:
        self._samples.append(MetricSample.model_validate(
            {"t_s": t_s, "values": values, "replica": replica}))

    def write_gpu(self, t_s: float, values: dict[str, float], source: int = 0) -> None:
        return None  # the twin has no GPU exporter

    def close(self) -> None:
        return None

    def read(self) -> RunData:
        assert self.manifest is not None, "write_manifest first"
        data = b"\n".join(self._lines) + b"\n" if self._lines else b""
        return run_data(self.manifest, data, self._samples, path=str(self.dir))
