"""What a lost worker had: its requests in flight or due, written as ``lost`` records.

A split run's worker announces every request as soon as its id is fixed (when it
becomes due, before it is sent: ``LaneContext.on_plan``), with its next batch of
records; the driver keeps, per worker, the requests announced and not yet finished
(:class:`InFlight`). When a worker dies, is killed or stops answering, each of them
due by the time the loss is seen becomes a record with status ``lost`` (the server
may have seen it, or not); those due later were never sent. So every request a lost
worker sent is accounted, except one that became due and was sent between the
worker's last report and its loss, i.e. after a think time shorter than the report
interval (zero-think turns; a ``--ray`` actor reports every ``_ray._POLL_S``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson

from analysis import RecordDict
from analysis.schema import ErrorKind
from replay.client import CacheMark, StreamOutcome
from replay.load._context import LaneContext
from replay.load._lanes import _record

__all__ = ["InFlight", "planned_record"]

_NS = 1_000_000_000


def planned_record(ctx: LaneContext, rid: str, chain: Any, turn: int, req: Any, prompt: Any,
                   due_ns: int, think_s: float) -> RecordDict:
    """The ``lost`` record a request gets if its worker is lost with it (sent at its
    due time, no answer): built when it becomes due, kept until its real record comes."""
    mark = CacheMark(expected=0, blocks=0, carry=0, tail=np.empty(0, np.int32), scope=None)
    rec = _record(ctx, rid, chain, turn, req, prompt, mark, due_ns, think_s, StreamOutcome())
    rec["status"] = "lost"
    rec["error_kind"] = ErrorKind.WORKER_LOST
    rec["phase"] = ctx.fixed.phase(due_ns)  # type: ignore[typeddict-item]
    rec["sent_s"] = rec["due_s"]
    rec["end_s"] = None
    rec["expected_cached_tokens"] = None
    return rec


def record_id(line: bytes) -> str:
    """The ``id`` of a serialised record (the first key, as the lanes write it)."""
    if line.startswith(b'{"id":"'):
        end = line.find(b'"', 7)
        if end > 0:
            return line[7:end].decode()
    value = orjson.loads(line).get("id")
    return value if isinstance(value, str) else ""


class InFlight:
    """Per worker: the requests announced and not yet finished (see the module docstring)."""

    def __init__(self, workers: int) -> None:
        self.open: list[dict[str, dict[str, Any]]] = [{} for _ in range(workers)]

    def update(self, w: int, planned: list[bytes], lines: list[bytes]) -> None:
        """A worker's batch: the requests it announced, then the records it finished
        (a request announced and finished within one batch comes and goes)."""
        mine = self.open[w]
        for raw in planned:
            rec = orjson.loads(raw)
            mine[rec["id"]] = rec
        for line in lines:
            mine.pop(record_id(line), None)

    def lose(self, w: int, now_s: float, why: str) -> list[bytes]:
        """The ``lost`` records of worker ``w``, lost at ``now_s`` (run time): its
        requests announced, unfinished and due by then."""
        mine, self.open[w] = self.open[w], {}
        message = (f"worker {w} was lost ({why}) with this request in flight or due: "
                   "what the server did with it is unknown")
        out = []
        for rec in sorted(mine.values(), key=lambda r: (r["due_s"], r["id"])):
            if rec["due_s"] <= now_s:
                rec["error_message"] = message
                out.append(orjson.dumps(rec))
        return out
