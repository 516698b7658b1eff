"""Tiny workloads written with the real writer (growing-history chains)."""

from __future__ import annotations

from pathlib import Path

from traces._io import write_workload
from traces._models import Request, Session, Subagent, WorkloadHeader


def chain_requests(
    *, turns: int, new_blocks: int, block_size: int, output: int, think_s: float,
    first_id: int, shared: int = 0, shared_ids: tuple[int, ...] = (),
    arrival: float | None = None,
) -> tuple[Request, ...]:
    """A growing-history chain: each turn appends ``new_blocks`` blocks to the last."""
    reqs = []
    nblocks = 0
    nid = first_id
    for t in range(turns):
        if t == 0:
            ids = tuple(shared_ids) + tuple(range(nid, nid + new_blocks - len(shared_ids)))
            nid += new_blocks - len(shared_ids)
        else:
            ids = tuple(range(nid, nid + new_blocks))
            nid += new_blocks
        nblocks += new_blocks
        reqs.append(Request(
            prompt_tokens=nblocks * block_size, output_tokens=output,
            prefix_blocks=nblocks - new_blocks, new_block_ids=ids, shared_blocks=shared,
            think_time_s=think_s if t else 0.0,
            arrival_s=(arrival + t) if arrival is not None else None,
        ))
    return tuple(reqs)


def make_workload(
    path: Path, *, sessions: int = 4, turns: int = 5, new_blocks: int = 4, block_size: int = 16,
    output: int = 20, think_s: float = 0.1, shared_blocks: int = 2,
    arrival: str = "closed", subagent_every: int = 0,
) -> Path:
    """Write a small workload; sessions share ``shared_blocks`` leading blocks."""
    shared_ids = tuple(range(1, shared_blocks + 1))
    out = []
    for s in range(sessions):
        reqs = list(chain_requests(
            turns=turns, new_blocks=new_blocks, block_size=block_size, output=output,
            think_s=think_s, first_id=10_000 * (s + 1), shared=shared_blocks,
            shared_ids=shared_ids, arrival=float(s) * 0.2 if arrival != "closed" else None,
        ))
        if subagent_every and s % subagent_every == 0:
            sub = Subagent(id=f"s{s}-a0", requests=chain_requests(
                turns=2, new_blocks=2, block_size=block_size, output=output, think_s=0.0,
                first_id=10_000 * (s + 1) + 5_000))
            sub2 = Subagent(id=f"s{s}-a1", requests=chain_requests(
                turns=2, new_blocks=2, block_size=block_size, output=output, think_s=0.0,
                first_id=10_000 * (s + 1) + 7_000))
            reqs[1] = reqs[1].model_copy(update={"subagents": (sub, sub2)})
        out.append(Session(id=f"s{s}", requests=tuple(reqs)))
    write_workload(path, WorkloadHeader(source="test", block_size=block_size, arrival=arrival),
                   out)
    return path
