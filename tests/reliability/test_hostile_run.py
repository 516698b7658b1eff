"""Whole runs (``agentreplay run``) against each hostile-server mode: exact accounting.

Every request the server received has exactly one record, with the status and
error kind the mode calls for (or ``incomplete`` when the drain cut it); the run
names the server the user gave (a redirect never moves the run elsewhere), and
the command ends cleanly with what the user should see.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis import RequestRecord
from tests.reliability.hostile_server import EXPECTED, serving
from tests.support.commands import call as _call
from tests.support.runs import manifest, records
from tests.support.workloads import make_workload

pytestmark = pytest.mark.sim




def _check(mode: str, recs: list[RequestRecord]) -> None:
    want = EXPECTED[mode]
    assert recs, mode
    for r in recs:
        got = (r.status, r.error_kind)
        if got != want:
            assert r.status == "incomplete" and r.phase == "drain", (mode, r)
    assert any((r.status, r.error_kind) == want for r in recs), mode


@pytest.mark.parametrize("mode", sorted(EXPECTED))
def test_every_request_the_server_saw_has_one_record(tmp_path: Path, mode: str) -> None:
    wl = make_workload(tmp_path / "wl.jsonl", sessions=2, turns=3, output=4, think_s=0.0)
    out = tmp_path / "run"
    with serving(mode) as srv:
        code, err = _call(["run", "--target", srv.url, "--workload", str(wl), "--users", "2",
                           "--duration", "1", "--drain", "1.5", "--out", str(out), "--quiet",
                           "--ttft-timeout", "0.5", "--itl-timeout", "0.5",
                           "--metrics-interval", "0.5", "--vocab-size", "1000"])
        seen = list(srv.seen)
        elsewhere = list(srv.elsewhere_seen)
    assert "Traceback" not in err and code in (0, 3), (code, err)
    assert f"run written to {out}" in err
    recs = records(out)
    ids = [r.id for r in recs]
    assert len(ids) == len(set(ids)), "a request was recorded twice"
    assert len(seen) == len(set(seen)) and set(seen) <= set(ids), "a request has no record"
    # a request the server never saw was cut by the drain on its way there
    assert all(r.status == "incomplete" for r in recs if r.id not in seen)
    _check(mode, recs)
    assert elsewhere == []  # the redirect's target was never asked
    m = manifest(out)
    assert m.target == srv.url and m.complete
    if mode == "redirect":
        assert all("/v1/completions" in (r.error_message or "") for r in recs
                   if r.error_kind == "redirect")
    if EXPECTED[mode][0] == "ok":
        assert all(r.output_tokens == r.output_tokens_asked == sum(r.chunk_tokens)
                   for r in recs if r.status == "ok")
    else:
        assert all(r.status != "ok" for r in recs)
        if mode in ("absurd_usage", "cached_above_prompt", "negative_usage"):
            # the impossible numbers are not the record's counts
            assert all(r.output_tokens <= r.output_tokens_asked for r in recs)
            assert all(r.cached_tokens is None for r in recs)
