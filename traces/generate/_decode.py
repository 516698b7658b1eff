"""The ``decode`` profile: fixed-size requests that measure decode throughput.

Every request has ``input_tokens`` of fresh prompt (no reuse across requests
or users) and asks for exactly ``output_tokens`` (the replay always sends
``ignore_eos``), with no think time. With one closed-loop user per concurrent
request, a load level is a batch size: the published decode tables (input 1,
output 1,000) can be rerun as they were measured.
"""

from __future__ import annotations

from collections.abc import Iterator

from traces._errors import TraceError
from traces._import_common import Counters, IdSpace, ImportedTrace
from traces._models import Request, Session, WorkloadHeader

__all__ = ["DECODE", "decode_sessions"]

DECODE = "decode"


def decode_sessions(*, sessions: int, max_context: int, block_size: int, input_tokens: int,
                    output_tokens: int, requests_per_session: int) -> ImportedTrace:
    """``sessions`` sessions of ``requests_per_session`` independent fixed-size requests."""
    for name, value in (("input_tokens", input_tokens), ("output_tokens", output_tokens),
                        ("requests_per_session", requests_per_session)):
        if value < 1:
            raise TraceError(f"must be >= 1, got {value}", field=name)
    if input_tokens + output_tokens > max_context:
        raise TraceError(f"input {input_tokens} + output {output_tokens} tokens exceed "
                         f"max_context {max_context}", field="output_tokens")
    header = WorkloadHeader(
        source=DECODE, block_size=block_size, sessions=sessions, arrival="closed",
        max_context=max_context,
        params={"profile": DECODE, "sessions": sessions, "input_tokens": input_tokens,
                "output_tokens": output_tokens, "requests_per_session": requests_per_session,
                "ignore_eos": True, "think_time_s": 0.0, "reuse": "none"},
    )
    blocks = -(-input_tokens // block_size)
    width = len(str(max(sessions - 1, 0)))

    def draw(_: Counters) -> Iterator[Session]:
        ids = IdSpace()
        for index in range(sessions):
            reqs = tuple(Request(prompt_tokens=input_tokens, output_tokens=output_tokens,
                                 new_block_ids=tuple(ids.fresh(blocks)), kind="user_text")
                         for _ in range(requests_per_session))
            yield Session(id=f"d{index:0{width}d}", agent_type=DECODE, requests=reqs)

    return ImportedTrace(header, draw, ())
