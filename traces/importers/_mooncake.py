"""Import Mooncake JSONL traces: ``{timestamp (ms), input_length, output_length, hash_ids}``.

No sessions: each line becomes a one-request session arriving at its
timestamp (header ``arrival="timestamps"``). Blocks are 512 tokens and the
hash scope is global, so ids are kept as they are and every block counts as
meant to be shared (``shared_blocks`` = all of them: no per-user salt).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from traces._errors import TraceError
from traces._import_common import (
    MAX_REQUEST_TOKENS,
    ChainEncoder,
    Counters,
    ImportedTrace,
    require_file,
)
from traces._lines import bounded_lines
from traces._models import Session, WorkloadHeader
from traces._scale import make_scaler, scale_params

__all__ = ["MOONCAKE_BLOCK_SIZE", "import_mooncake"]

MOONCAKE_BLOCK_SIZE = 512


class _MooncakeLine(BaseModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    timestamp: float = Field(ge=0)
    input_length: int = Field(ge=1)
    output_length: int = Field(ge=0)
    hash_ids: list[int]


def import_mooncake(path: str | os.PathLike[str], *, max_context: int | None = None,
                    block_size: int = MOONCAKE_BLOCK_SIZE, token_scale: float = 1.0
                    ) -> ImportedTrace:
    """Stream one-request sessions from a Mooncake JSONL file."""
    file = Path(path)
    require_file(file, "mooncake")
    base = WorkloadHeader(
        source="mooncake", block_size=block_size, arrival="timestamps",
        max_context=max_context, params={"path": file.name, **scale_params(token_scale)},
    )
    scaler = make_scaler(token_scale, block_size)

    def sessions(counters: Counters) -> Iterator[Session]:
        name = str(file)
        lineno = count = 0
        with open(file, "rb") as fh:
            for lineno, raw in bounded_lines(fh, name):
                if not raw.strip():
                    continue
                try:
                    obj = orjson.loads(raw)
                except orjson.JSONDecodeError as exc:
                    raise TraceError(f"invalid JSON ({exc.msg})", file=name, line=lineno) \
                        from None
                if not isinstance(obj, dict):
                    raise TraceError("expected a JSON object", file=name, line=lineno)
                try:
                    rec = _MooncakeLine.model_validate(obj)
                except ValidationError as exc:
                    raise TraceError.from_validation(exc, file=name, line=lineno) from None
                for fname, value in (("input_length", rec.input_length),
                                     ("output_length", rec.output_length)):
                    if value > MAX_REQUEST_TOKENS:
                        raise TraceError(f"more than {MAX_REQUEST_TOKENS:,} tokens in one "
                                         "request", file=name, line=lineno, field=fname)
                want = -(-rec.input_length // block_size)
                if len(rec.hash_ids) != want:
                    raise TraceError(
                        f"{len(rec.hash_ids)} hash_ids but input_length {rec.input_length} "
                        f"needs {want} blocks of {block_size}",
                        file=name, line=lineno, field="hash_ids",
                    )
                output = rec.output_length
                if output < 1:
                    output = 1
                    counters.zero_outputs_raised += 1
                enc = ChainEncoder(block_size, max_context, counters, len(rec.hash_ids),
                                   scaler)
                req = enc.encode(list(rec.hash_ids), rec.input_length, output,
                                 arrival_s=rec.timestamp / 1000.0)
                counters.sessions_compacted += enc.compactions > 0
                count += 1
                yield Session(id=f"r{lineno}", agent_type="mooncake", requests=(req,),
                              compactions=enc.compactions)
        if not count:
            raise TraceError("empty file (no requests)", file=name, line=max(lineno, 1))

    return ImportedTrace(base, sessions)
