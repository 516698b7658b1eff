"""``--api chat`` against the real vLLM server: exact prompts and exact prefix hits.

The same two-session, three-turn workload as test_replay_real.py, sent as chat
messages with no ``--vocab-size``. The server's own numbers are the referee: each
response's ``usage.prompt_tokens`` must be within 1% of the workload's prompt
length (the chat template's tokens included), and the prefix-cache hits the
client predicted must equal the ``vllm:prefix_cache_hits`` delta.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import orjson
import pytest

from analysis import measure, read_run, summarize
from replay.client._poller import parse_prometheus
from replay.load import RunSettings, run_load_sync
from replay.servers.launch._launcher import LaunchedArm
from tests.support.vllm_sessions import BS, TURNS
from tests.support.vllm_sessions import session as _session
from traces import WorkloadHeader, write_workload

pytestmark = pytest.mark.vllm

HITS = "vllm:prefix_cache_hits_total"


def _hits(url: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as resp:
        return parse_prometheus(resp.read().decode()).get(HITS, 0.0)


def _reset(url: str) -> None:
    req = urllib.request.Request(f"{url}/reset_prefix_cache", data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert json.loads(resp.read()) == {"success": True}


def test_chat_prompts_are_exact_and_hits_match_the_server(
    vllm_server: LaunchedArm, tmp_path: Path
) -> None:
    workload = tmp_path / "w.jsonl"
    header = WorkloadHeader(source="hand-built", seed=0, block_size=BS, arrival="open",
                            max_context=4096)
    write_workload(workload, header, [_session("a", 100), _session("b", 200)])
    _reset(vllm_server.url)
    before = _hits(vllm_server.url)

    settings = RunSettings(target=vllm_server.url, users=2, duration_s=120.0, drain_s=30.0,
                           api="chat", metrics_interval_s=None)
    out = run_load_sync(settings, workload, tmp_path / "run")

    records = [orjson.loads(line) for line in (out / "requests.jsonl").read_bytes().splitlines()]
    assert len(records) == 2 * len(TURNS)
    for rec in records:
        assert rec["status"] == "ok", rec
        asked, got = rec["prompt_tokens"], rec["prompt_tokens_server"]
        assert abs(got - asked) <= 0.01 * asked, (asked, got)
        assert rec["output_tokens"] == rec["output_tokens_asked"]
    expected = sum(r["expected_cached_tokens"] for r in records)
    assert expected > 0, "the workload shares prefixes: some hits must be predicted"
    deadline = time.monotonic() + 10
    delta = _hits(vllm_server.url) - before
    while delta != expected and time.monotonic() < deadline:
        time.sleep(0.2)
        delta = _hits(vllm_server.url) - before
    assert delta == expected, f"server hits {delta}, client predicted {expected}"
    summary = summarize(measure(read_run(out)), bootstrap=False, tiers=())
    assert summary.counts.prompt_mismatch == 0
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["api"] == "chat" and manifest["vocab_size"] == 2048
