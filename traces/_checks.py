"""Consistency checks of one session against the workload's block size.

A request's blocks must cover its prompt (``ceil(prompt_tokens / block_size)``
blocks, the last possibly partial) and its prefix can only reuse blocks the
previous request of the same chain had. Subagents are chains of their own.
"""

from __future__ import annotations

from traces._errors import TraceError
from traces._models import Request, Session

__all__ = ["check_session", "expected_blocks"]


def expected_blocks(prompt_tokens: int, block_size: int) -> int:
    """Blocks needed to hold ``prompt_tokens`` (the last one possibly partial)."""
    return -(-prompt_tokens // block_size)


def _check_chain(
    requests: tuple[Request, ...], block_size: int, where: str, file: str | None,
    line: int | None,
) -> None:
    prev_blocks: int | None = None
    for i, req in enumerate(requests):
        field = f"{where}.{i}"
        want = expected_blocks(req.prompt_tokens, block_size)
        if req.num_blocks != want:
            raise TraceError(
                f"{req.num_blocks} blocks (prefix_blocks {req.prefix_blocks} + "
                f"{len(req.new_block_ids)} new) but prompt_tokens {req.prompt_tokens} needs "
                f"{want} blocks of {block_size}",
                file=file, line=line, field=f"{field}.new_block_ids",
            )
        if prev_blocks is None and req.prefix_blocks:
            raise TraceError(
                f"prefix_blocks {req.prefix_blocks} on the first request of a chain (must be 0)",
                file=file, line=line, field=f"{field}.prefix_blocks",
            )
        if prev_blocks is not None and req.prefix_blocks > prev_blocks:
            raise TraceError(
                f"prefix_blocks {req.prefix_blocks} exceeds the previous request's "
                f"{prev_blocks} blocks",
                file=file, line=line, field=f"{field}.prefix_blocks",
            )
        for j, sub in enumerate(req.subagents):
            _check_chain(sub.requests, block_size, f"{field}.subagents.{j}.requests", file, line)
        prev_blocks = req.num_blocks


def check_session(
    session: Session, block_size: int, *, file: str | None = None, line: int | None = None
) -> None:
    """Raise TraceError (file, line, field path) if a request is inconsistent."""
    _check_chain(session.requests, block_size, "requests", file, line)
