"""bench/read_path.py feeds the real read path what the stub sends: every cut of the
body must give the whole answer (the bench raises if one does not)."""

from __future__ import annotations

import asyncio

import pytest


@pytest.mark.parametrize("per_read", [1, 3, 4, 0])
def test_every_cut_of_the_stub_body_reads_to_the_end(read_path, per_read: int) -> None:
    pieces = read_path.reads(per_read)
    assert b"".join(pieces[1:]) == b"".join(read_path.stub_events())
    if per_read == 1:
        assert len(pieces) == 1 + read_path.TOKENS + 2  # head, tokens, usage, [DONE]
    ns = asyncio.run(read_path.cpu_ns_per_token(per_read, requests=2, repeats=1))
    assert ns > 0
