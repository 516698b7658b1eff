"""Import WEKA / AgentX coding-agent session JSON (one session per file).

Format (``shared/traces/SOURCES.md``): ``{id, block_size, hash_id_scope,
system_tokens, tool_tokens, requests: [...]}``; a request carries ``in``,
``out``, ``hash_ids`` (one per *full* 64-token block), ``think_time``, ``t``,
``input_types``; a ``"subagent"`` entry nests its own ``requests``. Two shapes
of subagent timing exist, told apart by the nested requests' ``t``:

- relative (the shared sample, SOURCES.md): nested ``t`` count from the spawn
  (the first is 0) and the entry's ``t`` is when the subagent *finished*:
  spawn = ``t - duration_ms/1000``;
- absolute (the captures AgentX serves now, agentx-harness's AgentX FAQ, "What
  does a recorded trace actually look like?"): nested ``t`` are session times and
  the entry's ``t`` is the spawn, its first request's ``t``; it finished at
  ``t + duration_ms/1000``.

Either way the spawn comes shortly after the preceding request's response ended
(``t + api_time``); that gap becomes the subagent's first think time. Subagents
after one request run concurrently; the parent's next pause is its ``t`` minus
the last blocking subagent's finish. ``duration_ms: null`` marks a background
subagent the parent did not wait for.

Ids are local to a session, so each session (with its subagents) gets its own
namespace of global ids. A partial last block gets a fresh id (its content is
new). ``system_tokens + tool_tokens`` is the shared head. With ``max_context``,
over-long requests are compacted (see ``ChainEncoder``) and counted.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from traces._errors import TraceError, first_problem
from traces._import_common import (
    MAX_REQUEST_TOKENS,
    ChainEncoder,
    Counters,
    Duplicates,
    IdSpace,
    ImportedTrace,
)
from traces._models import Request, RequestKind, Session, Subagent, WorkloadHeader
from traces._scale import Scaler, make_scaler, scale_params

__all__ = ["import_weka"]


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, allow_inf_nan=False)


class _WekaRequest(_Loose):
    t: float = Field(default=0.0, ge=0.0)
    type: str = "n"
    prompt: int = Field(alias="in", ge=1)
    output: int = Field(alias="out", ge=0)
    hash_ids: list[int]
    input_types: list[str] = []
    think_time: float = Field(default=0.0, ge=0.0)
    api_time: float | None = Field(default=None, ge=0.0)


class _WekaSubagent(_Loose):
    t: float = Field(default=0.0, ge=0.0)
    agent_id: str = "subagent"
    subagent_type: str = "subagent"
    duration_ms: float | None = Field(default=None, ge=0.0)
    system_tokens: int = Field(default=0, ge=0)
    tool_tokens: int = Field(default=0, ge=0)
    requests: list[dict[str, Any]] = Field(min_length=1)


class _WekaSession(_Loose):
    id: str | None = None
    block_size: int = Field(default=64, ge=1)
    hash_id_scope: str = "local"
    system_tokens: int = Field(default=0, ge=0)
    tool_tokens: int = Field(default=0, ge=0)
    requests: list[dict[str, Any]] = Field(min_length=1)


def _kind(req: _WekaRequest) -> RequestKind:
    if "tool_result" in req.input_types:
        return "tool_result"
    if "text" in req.input_types:
        return "user_text"
    return "side" if req.type == "s" else "other"


class _Ctx:
    """Where we are (file, line) and the id space of the current session."""

    def __init__(self, file: str, line: int | None, remap: Callable[[int], int],
                 ids: IdSpace, block_size: int, max_context: int | None,
                 counters: Counters, scaler: Scaler | None) -> None:
        self.file, self.line, self.remap, self.ids = file, line, remap, ids
        self.block_size, self.max_context, self.counters = block_size, max_context, counters
        self.scaler = scaler

    def error(self, message: str, field: str) -> TraceError:
        return TraceError(message, file=self.file, line=self.line, field=field)

    def validate(self, model: type[_Loose], obj: object, where: str) -> Any:
        if not isinstance(obj, dict):
            raise self.error(f"expected an object, got {type(obj).__name__}", where)
        try:
            return model.model_validate(obj)
        except ValidationError as exc:
            problem = first_problem(exc)
            raise self.error(problem.message, ".".join(p for p in (where, problem.field) if p))\
                from None


@dataclass
class _Pending:
    """A parent request with the subagents spawned after its response."""

    req: _WekaRequest
    subs: list[Subagent] = field(default_factory=list)
    blocking_end: float | None = None
    """Latest finish time of the blocking subagents spawned after it."""


_SAME_INSTANT_S = 1e-3
"""Nested request times at or after the entry's ``t`` (within this) are absolute."""


def _spawn_and_end(sub: _WekaSubagent) -> tuple[float | None, float | None]:
    """When a subagent was spawned and when it finished, in session seconds (None:
    not recorded), by its shape (module docstring): nested times that start at or
    after the entry's ``t`` are absolute, so ``t`` is the spawn; else ``t`` is the end."""
    first = sub.requests[0].get("t", 0.0)
    absolute = isinstance(first, int | float) and first + _SAME_INSTANT_S >= sub.t
    duration = None if sub.duration_ms is None else sub.duration_ms / 1000.0
    if duration is None:  # background: only an absolute shape says when it started
        return (sub.t if absolute else None), None
    if absolute:
        return sub.t, sub.t + duration
    return sub.t - duration, sub.t


def _subagent(ctx: _Ctx, parent: _Pending, obj: object, field_name: str
              ) -> tuple[Subagent, int]:
    """One subagent entry, spawned ``delay`` after its parent's response ended."""
    sub = ctx.validate(_WekaSubagent, obj, field_name)
    background = sub.duration_ms is None
    spawn, finish = _spawn_and_end(sub)
    delay = 0.0
    if spawn is not None and parent.req.api_time is not None:
        delay = max(0.0, spawn - (parent.req.t + parent.req.api_time))
    reqs, compactions = _chain(ctx, sub.requests, sub.system_tokens + sub.tool_tokens,
                               f"{field_name}.requests", first_think=delay)
    if finish is not None:  # a blocking subagent: the parent waits for its finish
        end = parent.blocking_end
        parent.blocking_end = finish if end is None else max(end, finish)
    return Subagent(id=sub.agent_id, type=sub.subagent_type, requests=reqs,
                    background=background), compactions


def _chain(ctx: _Ctx, raw: list[dict[str, Any]], shared_tokens: int, where: str,
           first_think: float = 0.0) -> tuple[tuple[Request, ...], int]:
    """Encode one chain (a session's or a subagent's requests); returns compactions too.

    After blocking subagents, the parent's next pause is ``next.t`` minus the
    last one's finish ``t`` (its ``think_time`` spans the subagents' run).
    """
    bs = ctx.block_size
    enc = ChainEncoder(bs, ctx.max_context, ctx.counters, shared_tokens // bs, ctx.scaler)
    pending: list[_Pending] = []
    compactions = 0
    for i, obj in enumerate(raw):
        field_name = f"{where}.{i}"
        if isinstance(obj, dict) and obj.get("type") == "subagent":
            if not pending:
                raise ctx.error("a subagent before the first request of its chain", field_name)
            sub, sub_comp = _subagent(ctx, pending[-1], obj, field_name)
            compactions += sub_comp
            pending[-1].subs.append(sub)
            continue
        req = ctx.validate(_WekaRequest, obj, field_name)
        if req.prompt > MAX_REQUEST_TOKENS or req.output > MAX_REQUEST_TOKENS:
            name = "in" if req.prompt > MAX_REQUEST_TOKENS else "out"
            raise ctx.error(f"more than {MAX_REQUEST_TOKENS:,} tokens in one request",
                            f"{field_name}.{name}")
        n_full = req.prompt // bs
        if len(req.hash_ids) not in (n_full, -(-req.prompt // bs)):
            raise ctx.error(
                f"{len(req.hash_ids)} hash_ids but in={req.prompt} tokens makes "
                f"{n_full} full blocks of {bs}", f"{field_name}.hash_ids",
            )
        pending.append(_Pending(req))
    out: list[Request] = []
    prev_end: float | None = None
    for p in pending:
        req = p.req
        full = [ctx.remap(h) for h in req.hash_ids]
        if len(full) * bs < req.prompt:
            full.extend(ctx.ids.fresh())  # the partial last block: new content
        output = req.output
        if output < 1:
            output = 1
            ctx.counters.zero_outputs_raised += 1
        if not out:
            think = first_think
        elif prev_end is not None:
            think = max(0.0, req.t - prev_end)
        else:
            think = req.think_time
        out.append(enc.encode(full, req.prompt, output, think_time_s=round(think, 3),
                              kind=_kind(req), subagents=tuple(p.subs)))
        prev_end = p.blocking_end
    return tuple(out), compactions + enc.compactions


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix == ".json" and p.is_file())
        if not files:
            raise TraceError("no .json session files in this folder", file=str(path))
        return files
    if not path.exists():
        raise TraceError("no such file or folder", file=str(path))
    return [path]


MAX_SESSION_FILE_BYTES = 256 << 20
"""A WEKA session file is one JSON document; larger ones are refused unread."""


def _load(file: Path) -> tuple[list[Any], int | None]:
    try:
        with open(file, "rb") as fh:
            head = fh.read(1 << 16)
            start = head.lstrip()[:1]
            if start and start not in b"{[":  # /dev/zero, a binary: refuse before reading
                raise TraceError("invalid JSON (a session file starts with '{')",
                                 file=str(file), line=1)
            data = head + fh.read(MAX_SESSION_FILE_BYTES + 1 - len(head))
    except OSError as exc:
        raise TraceError(f"cannot read ({exc.strerror})", file=str(file)) from None
    if len(data) > MAX_SESSION_FILE_BYTES:
        raise TraceError(f"larger than {MAX_SESSION_FILE_BYTES >> 20} MiB: not a session file",
                         file=str(file))
    if not data.strip():
        raise TraceError("empty file", file=str(file), line=1)
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise TraceError(f"invalid JSON ({exc.msg})", file=str(file), line=exc.lineno) from None
    # Field errors can name line 1 only when the whole JSON sits on one line.
    line = 1 if data.count(b"\n", 0, len(data.rstrip())) == 0 else None
    if isinstance(obj, list):
        return obj, line
    return [obj], line


def import_weka(path: str | os.PathLike[str], *, max_context: int | None = None,
                dedupe: bool = False, token_scale: float = 1.0) -> ImportedTrace:
    """Stream the sessions of a WEKA session file or a folder of them.

    Sessions whose content (everything but the id) repeats an earlier one are
    counted in ``duplicate_sessions``; ``dedupe`` drops them, else they are kept.
    ``token_scale`` below 1 shrinks every size (see ``traces._scale``).
    """
    root = Path(path)
    files = _files(root)
    first, _ = _load(files[0])
    block_size = first[0].get("block_size", 64) if first and isinstance(first[0], dict) else 64
    if not isinstance(block_size, int) or isinstance(block_size, bool) or block_size < 1:
        raise TraceError("must be a positive integer", file=str(files[0]), line=1,
                         field="block_size")
    base = WorkloadHeader(
        source="weka", block_size=block_size, arrival="closed", max_context=max_context,
        params={"path": root.name, "files": len(files), "hash_id_scope": "session",
                "dedupe": dedupe, **scale_params(token_scale)},
    )
    scaler = make_scaler(token_scale, block_size)

    def sessions(counters: Counters) -> Iterator[Session]:
        ids = IdSpace()
        seen = Duplicates(counters, dedupe)
        for file in files:
            objs, line = _load(file)
            for k, obj in enumerate(objs):
                top = "session" if len(objs) == 1 else f"sessions.{k}"
                where = "requests" if len(objs) == 1 else f"{top}.requests"
                ctx = _Ctx(str(file), line, ids.namespace(), ids, block_size, max_context,
                           counters, scaler)
                meta = ctx.validate(_WekaSession, obj, top)
                content = {k: v for k, v in obj.items() if k != "id"}
                if seen.repeat(content) and dedupe:
                    continue
                if meta.block_size != block_size:
                    raise ctx.error(f"block_size {meta.block_size} differs from the first "
                                    f"file's {block_size}", "block_size")
                reqs, compactions = _chain(ctx, meta.requests,
                                           meta.system_tokens + meta.tool_tokens, where)
                counters.sessions_compacted += compactions > 0
                sid = meta.id or (file.stem if len(objs) == 1 else f"{file.stem}.{k}")
                yield Session(id=sid, agent_type="weka", requests=reqs,
                              compactions=compactions)

    return ImportedTrace(base, sessions)
