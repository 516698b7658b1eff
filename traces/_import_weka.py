"""Import WEKA / AgentX coding-agent session JSON (one session per file).

Format (``shared/traces/SOURCES.md``): ``{id, block_size, hash_id_scope,
system_tokens, tool_tokens, requests: [...]}``; a request carries ``in``,
``out``, ``hash_ids`` (one per *full* 64-token block), ``think_time``, ``t``,
``input_types``; a ``"subagent"`` entry nests its own ``requests`` and runs
after the preceding request (the parent waits for it).

Ids are local to a session, so each session (with its subagents) gets its own
namespace of global ids. A partial last block gets a fresh id (its content is
new). ``system_tokens + tool_tokens`` is the shared head. With ``max_context``,
over-long requests are compacted (see ``ChainEncoder``) and counted.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from traces._errors import TraceError
from traces._import_common import ChainEncoder, Counters, IdSpace, ImportedTrace
from traces._models import Request, RequestKind, Session, Subagent, WorkloadHeader

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
                 counters: Counters) -> None:
        self.file, self.line, self.remap, self.ids = file, line, remap, ids
        self.block_size, self.max_context, self.counters = block_size, max_context, counters

    def error(self, message: str, field: str) -> TraceError:
        return TraceError(message, file=self.file, line=self.line, field=field)

    def validate(self, model: type[_Loose], obj: object, where: str) -> Any:
        if not isinstance(obj, dict):
            raise self.error(f"expected an object, got {type(obj).__name__}", where)
        try:
            return model.model_validate(obj)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err.get("loc", ()))
            raise self.error(err.get("msg", "invalid value"), f"{where}.{loc}" if loc else where)\
                from None


def _chain(ctx: _Ctx, raw: list[dict[str, Any]], shared_tokens: int, where: str
           ) -> tuple[tuple[Request, ...], int]:
    """Encode one chain (a session's or a subagent's requests); returns compactions too."""
    bs = ctx.block_size
    enc = ChainEncoder(bs, ctx.max_context, ctx.counters, shared_tokens // bs)
    pending: list[tuple[int, _WekaRequest, list[Subagent], float | None]] = []
    compactions = 0
    for i, obj in enumerate(raw):
        field = f"{where}.{i}"
        if isinstance(obj, dict) and obj.get("type") == "subagent":
            sub = ctx.validate(_WekaSubagent, obj, field)
            if not pending:
                raise ctx.error("a subagent before the first request of its chain", field)
            reqs, sub_comp = _chain(
                ctx, sub.requests, sub.system_tokens + sub.tool_tokens, f"{field}.requests"
            )
            compactions += sub_comp
            pending[-1][2].append(Subagent(id=sub.agent_id, type=sub.subagent_type,
                                           requests=reqs))
            if sub.duration_ms is not None:
                end = sub.t + sub.duration_ms / 1000.0
                prev_end = pending[-1][3]
                idx, r, subs, _ = pending[-1]
                pending[-1] = (idx, r, subs, end if prev_end is None else max(prev_end, end))
            continue
        req = ctx.validate(_WekaRequest, obj, field)
        n_full = req.prompt // bs
        if len(req.hash_ids) not in (n_full, -(-req.prompt // bs)):
            raise ctx.error(
                f"{len(req.hash_ids)} hash_ids but in={req.prompt} tokens makes "
                f"{n_full} full blocks of {bs}", f"{field}.hash_ids",
            )
        pending.append((i, req, [], None))
    out: list[Request] = []
    prev_sub_end: float | None = None
    for _, req, subs, sub_end in pending:
        full = [ctx.remap(h) for h in req.hash_ids]
        if len(full) * bs < req.prompt:
            full.extend(ctx.ids.fresh())  # the partial last block: new content
        output = req.output
        if output < 1:
            output = 1
            ctx.counters.zero_outputs_raised += 1
        think = req.think_time
        if prev_sub_end is not None and out:
            think = max(0.0, req.t - prev_sub_end)
        out.append(enc.encode(full, req.prompt, output, think_time_s=round(think, 3),
                              kind=_kind(req), subagents=tuple(subs)))
        prev_sub_end = sub_end
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


def _load(file: Path) -> tuple[list[Any], int | None]:
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise TraceError(f"cannot read ({exc.strerror})", file=str(file)) from None
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


def import_weka(path: str | os.PathLike[str], *, max_context: int | None = None
                ) -> ImportedTrace:
    """Stream the sessions of a WEKA session file or a folder of them."""
    root = Path(path)
    files = _files(root)
    first, _ = _load(files[0])
    block_size = first[0].get("block_size", 64) if first and isinstance(first[0], dict) else 64
    if not isinstance(block_size, int) or isinstance(block_size, bool) or block_size < 1:
        raise TraceError("must be a positive integer", file=str(files[0]), line=1,
                         field="block_size")
    base = WorkloadHeader(
        source="weka", block_size=block_size, arrival="closed", max_context=max_context,
        params={"path": root.name, "files": len(files), "hash_id_scope": "session"},
    )

    def sessions(counters: Counters) -> Iterator[Session]:
        ids = IdSpace()
        for file in files:
            objs, line = _load(file)
            for k, obj in enumerate(objs):
                top = "session" if len(objs) == 1 else f"sessions.{k}"
                where = "requests" if len(objs) == 1 else f"{top}.requests"
                ctx = _Ctx(str(file), line, ids.namespace(), ids, block_size, max_context,
                           counters)
                meta = ctx.validate(_WekaSession, obj, top)
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
