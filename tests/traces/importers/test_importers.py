"""Importers against the real trace samples (tests/fixtures/traces): counts match the files.

The expected counts are computed here with plain json/csv parsing, independently
of the importers.
"""

from __future__ import annotations

import csv
import json
import math
from collections import Counter
from pathlib import Path

import pytest

from traces import (
    Request,
    Session,
    TraceError,
    check_session,
    import_azure,
    import_mooncake,
    import_tracelab,
    import_weka,
    iter_block_ids,
    iter_sessions,
    write_workload,
)


def _all_requests(sessions: list[Session]) -> list[Request]:
    out: list[Request] = []

    def walk(reqs: tuple[Request, ...]) -> None:
        for r in reqs:
            out.append(r)
            for sub in r.subagents:
                walk(sub.requests)

    for s in sessions:
        walk(s.requests)
    return out


def _weka_truth(files: list[Path]) -> tuple[int, int, int, int, int]:
    n_req = prompt = output = subagents = 0

    def walk(reqs: list[dict]) -> None:
        nonlocal n_req, prompt, output, subagents
        for r in reqs:
            if r.get("type") == "subagent":
                subagents += 1
                walk(r["requests"])
            else:
                n_req += 1
                prompt += r["in"]
                output += r["out"]

    for f in files:
        walk(json.loads(f.read_text())["requests"])
    return len(files), n_req, prompt, output, subagents


def test_weka_counts_match(sample_traces: Path, tmp_path: Path) -> None:
    files = sorted((sample_traces / "weka").glob("*.json"))
    imported = import_weka(sample_traces / "weka")
    sessions = list(imported.sessions)
    reqs = _all_requests(sessions)
    n_sub = sum(len(r.subagents) for r in reqs)
    got = (len(sessions), len(reqs), sum(r.prompt_tokens for r in reqs),
           sum(r.output_tokens for r in reqs), n_sub)
    assert got == _weka_truth(files)
    assert imported.header().params["compactions"] == 0
    for s in sessions:
        check_session(s, 64)
    # And the file written from it reads back verified.
    head = write_workload(tmp_path / "w.jsonl", imported.header, iter(sessions))
    assert head.sessions == len(files)
    assert list(iter_sessions(tmp_path / "w.jsonl")) == sessions


def test_weka_local_ids_become_global_per_session(sample_traces: Path) -> None:
    files = sorted((sample_traces / "weka").glob("*.json"))
    sessions = list(import_weka(sample_traces / "weka").sessions)
    ids_per_session = []
    for s, f in zip(sessions, files, strict=True):
        raw = json.loads(f.read_text())
        ids: set[int] = set()
        chains = [s.requests] + [sub.requests for r in s.requests for sub in r.subagents]
        for chain in chains:
            for full in iter_block_ids(chain):
                ids.update(full)
        ids_per_session.append(ids)
        # Equal local ids in the file <=> equal global ids: compare the
        # common-prefix structure of consecutive top-level requests.
        plain = [r for r in raw["requests"] if r.get("type") != "subagent"]
        for (a, b), req in zip(zip(plain, plain[1:], strict=False), s.requests[1:],
                               strict=False):
            lcp = 0
            while lcp < min(len(a["hash_ids"]), len(b["hash_ids"])) and \
                    a["hash_ids"][lcp] == b["hash_ids"][lcp]:
                lcp += 1
            assert req.prefix_blocks == lcp
    for i, a in enumerate(ids_per_session):
        for b in ids_per_session[i + 1:]:
            assert not a & b  # session-local scope: no accidental sharing


def test_weka_max_context_compacts_and_counts(sample_traces: Path) -> None:
    limit = 65_536
    imported = import_weka(sample_traces / "weka", max_context=limit)
    sessions = list(imported.sessions)
    reqs = _all_requests(sessions)
    _, n_req, _, _, _ = _weka_truth(sorted((sample_traces / "weka").glob("*.json")))
    assert len(reqs) == n_req  # nothing dropped
    assert all(r.prompt_tokens + r.output_tokens <= limit for r in reqs)
    params = imported.header().params
    over = 0
    for f in sorted((sample_traces / "weka").glob("*.json")):
        def walk(rs: list[dict]) -> int:
            return sum(walk(r["requests"]) if r.get("type") == "subagent"
                       else r["in"] + r["out"] > limit for r in rs)
        over += walk(json.loads(f.read_text())["requests"])
    assert over > 0
    assert params["truncated_requests"] >= over
    assert params["compactions"] >= 1
    assert sum(s.compactions for s in sessions) == params["compactions"]
    for s in sessions:
        check_session(s, 64)


@pytest.mark.parametrize("name", ["conversation_trace.jsonl", "synthetic_trace.jsonl"])
def test_mooncake_counts_and_arrivals(sample_traces: Path, name: str) -> None:
    path = sample_traces / "mooncake" / name
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    imported = import_mooncake(path)
    sessions = list(imported.sessions)
    head = imported.header()
    assert (head.block_size, head.arrival) == (512, "timestamps")
    assert len(sessions) == len(rows)
    assert all(len(s.requests) == 1 for s in sessions)
    reqs = [s.requests[0] for s in sessions]
    assert sum(r.prompt_tokens for r in reqs) == sum(r["input_length"] for r in rows)
    assert sum(r.output_tokens for r in reqs) == sum(r["output_length"] for r in rows)
    for req, row in zip(reqs, rows, strict=True):
        assert req.arrival_s == pytest.approx(row["timestamp"] / 1000)
        assert list(req.new_block_ids) == row["hash_ids"]  # global scope kept
        assert req.shared_blocks == len(row["hash_ids"])


@pytest.mark.parametrize("name", ["AzureLLMInferenceTrace_code.csv",
                                  "AzureLLMInferenceTrace_conv.csv"])
def test_azure_counts_and_unique_blocks(sample_traces: Path, name: str) -> None:
    path = sample_traces / "azure" / name
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    imported = import_azure(path)
    sessions = list(imported.sessions)
    reqs = [s.requests[0] for s in sessions]
    assert len(sessions) == len(rows)
    assert sum(r.prompt_tokens for r in reqs) == sum(int(r["ContextTokens"]) for r in rows)
    assert sum(r.output_tokens for r in reqs) == sum(int(r["GeneratedTokens"]) for r in rows)
    all_ids = [b for r in reqs for b in r.new_block_ids]
    assert len(all_ids) == len(set(all_ids))  # arrivals only: nothing shared
    assert reqs[0].arrival_s == 0.0
    assert all(a.arrival_s <= b.arrival_s for a, b in zip(reqs, reqs[1:], strict=False))  # type: ignore[operator]
    assert imported.header().arrival == "timestamps"


def test_tracelab_sessions_and_prefixes(sample_traces: Path) -> None:
    path = sample_traces / "tracelab" / "round_trace.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    sessions = list(import_tracelab(path).sessions)
    by_session = Counter(r["session_id"] for r in rows)
    assert {s.id: len(s.requests) for s in sessions} == dict(by_session)
    reqs = _all_requests(sessions)
    assert sum(r.prompt_tokens for r in reqs) == sum(r["input_tokens_total"] for r in rows)
    assert sum(r.output_tokens for r in reqs) == sum(r["output_tokens"] for r in rows)
    for s in sessions:
        check_session(s, 64)
        mine = sorted((r for r in rows if r["session_id"] == s.id),
                      key=lambda r: r["round_index"])
        for prev, row, req in zip(mine, mine[1:], s.requests[1:], strict=False):
            want = min(row["prefix_tokens"] // 64, prev["input_tokens_total"] // 64)
            assert req.prefix_blocks == want
        assert s.requests[0].shared_blocks == mine[0]["prefix_tokens"] // 64
    think = [r.think_time_s for s in sessions for r in s.requests[1:]]
    assert all(t >= 0 for t in think) and max(think) > 10  # tool waits show up


def test_tracelab_think_time_from_events(tmp_path: Path) -> None:
    rows = [
        {"session_id": "s", "round_index": 0, "input_tokens_total": 100, "prefix_tokens": 0,
         "output_tokens": 5, "timing_events": [
             {"event_type": "user_message", "timestamp": "2026-01-01T00:00:00Z"},
             {"event_type": "tool_call", "timestamp": "2026-01-01T00:00:04Z"}]},
        {"session_id": "s", "round_index": 1, "input_tokens_total": 300, "prefix_tokens": 100,
         "output_tokens": 5, "first_input_event_type": "tool_result", "timing_events": [
             {"event_type": "tool_result", "timestamp": "2026-01-01T00:00:10.5Z"},
             {"event_type": "text", "timestamp": "2026-01-01T00:00:12Z"}]},
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in reversed(rows)))  # order by round_index
    (s,) = import_tracelab(path).sessions
    assert [r.think_time_s for r in s.requests] == [0.0, 6.5]
    assert s.requests[1].kind == "tool_result"
    assert s.requests[1].prefix_blocks == 1
    assert s.requests[1].num_blocks == math.ceil(300 / 64)


@pytest.mark.parametrize(
    ("content", "line", "field"),
    [
        ('{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [1]}', 1,
         "hash_ids"),
        ('{"timestamp": 0, "input_length": -5, "output_length": 3, "hash_ids": []}', 1,
         "input_length"),
        ('{"timestamp": 0, "input_length": 5, "hash_ids": [1]}', 1, "output_length"),
        ('{"timestamp": 0, "input_length": 5, "output_length": 3, "hash_ids": [1]}\n[', 2,
         None),
    ],
)
def test_mooncake_errors_are_located(tmp_path: Path, content: str, line: int,
                                     field: str | None) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text(content)
    with pytest.raises(TraceError) as err:
        list(import_mooncake(path).sessions)
    assert (err.value.file, err.value.line, err.value.field) == (str(path), line, field)


def test_weka_errors_are_located(tmp_path: Path) -> None:
    good = {"id": "x", "block_size": 64, "requests": [
        {"t": 0, "type": "n", "in": 130, "out": 5, "hash_ids": [1, 2]},
        {"t": 1, "type": "n", "in": 200, "out": 5, "hash_ids": [1, 2, 3]},
    ]}
    path = tmp_path / "w.json"
    bad = json.loads(json.dumps(good))
    bad["requests"][1]["hash_ids"] = [1]
    path.write_text(json.dumps(bad))
    with pytest.raises(TraceError) as err:
        list(import_weka(path).sessions)
    assert (err.value.line, err.value.field) == (1, "requests.1.hash_ids")
    bad["requests"][1]["hash_ids"] = [1, 2, 3]
    bad["requests"][0]["out"] = -1
    path.write_text(json.dumps(bad))
    with pytest.raises(TraceError) as err:
        list(import_weka(path).sessions)
    assert err.value.field == "requests.0.out"
    path.write_text(json.dumps(good))
    (s,) = import_weka(path).sessions
    assert [r.num_blocks for r in s.requests] == [3, 4]  # partial last blocks added
    assert s.requests[1].prefix_blocks == 2


def test_azure_errors_are_located(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                    "2023-11-16 18:17:03.97,10,2\n2023-11-16 18:17:04.00,ten,2\n")
    with pytest.raises(TraceError) as err:
        list(import_azure(path).sessions)
    assert (err.value.line, err.value.field) == (3, "ContextTokens")
    path.write_text("")
    with pytest.raises(TraceError, match="empty"):
        list(import_azure(path).sessions)
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n")
    with pytest.raises(TraceError, match="no requests"):
        list(import_azure(path).sessions)


def test_blank_mooncake_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text("\n\n")
    with pytest.raises(TraceError, match="empty"):
        list(import_mooncake(path).sessions)


def test_chain_encoder_compacts_like_an_agent() -> None:
    from traces import Counters
    from traces._import_common import ChainEncoder

    counters = Counters()
    enc = ChainEncoder(block_size=10, max_context=200, counters=counters, shared_blocks=2)
    history: list[int] = []
    reqs = []
    for turn in range(12):  # each turn appends 4 blocks (40 tokens) to the history
        history = history + list(range(100 * turn, 100 * turn + 4))
        reqs.append(enc.encode(history, len(history) * 10, 20))
    assert all(r.prompt_tokens + r.output_tokens <= 200 for r in reqs)
    assert counters.compactions == enc.compactions >= 2
    assert counters.truncated_requests == sum(r.prompt_tokens < 40 * (i + 1)
                                              for i, r in enumerate(reqs))
    full = list(iter_block_ids(tuple(reqs)))
    for f in full:
        assert f[:2] == [0, 1]  # the shared head survives every compaction
    # Between compactions the kept history is appended to, so it is reused.
    appended = [r for r, prev in zip(reqs[1:], reqs, strict=False)
                if r.prefix_blocks == prev.num_blocks]
    assert len(appended) >= len(reqs) - 1 - counters.compactions


# Reuse is measured in 64-token blocks: at scale s one scaled block stands for ~1/s
# original ones, and the block holding each turn's new tail is new, so tiny contexts
# lose a few points of reuse to granularity (2048: s = 0.01).
@pytest.mark.parametrize(("limit", "reuse_tol"), [(2048, 0.12), (4096, 0.06), (32768, 0.03)])
def test_weka_token_scale_keeps_the_shape(sample_traces: Path, limit: int,
                                          reuse_tol: float) -> None:
    from traces import inspect_sessions, token_scale_for

    path = sample_traces / "weka"
    plain = list(import_weka(path).sessions)
    scale = token_scale_for(limit)
    imported = import_weka(path, max_context=limit, token_scale=scale)
    scaled = list(imported.sessions)
    assert imported.header().params["token_scale"] == scale
    for a, b in zip(plain, scaled, strict=True):
        check_session(b, 64)
        ra, rb = _all_requests([a]), _all_requests([b])
        assert len(ra) == len(rb)  # every request kept, subagents included
        assert [r.think_time_s for r in ra] == [r.think_time_s for r in rb]
        for x, y in zip(ra, rb, strict=True):
            assert y.prompt_tokens + y.output_tokens <= limit
            if y.prompt_tokens == max(1, round(x.prompt_tokens * scale)):  # not compacted
                assert y.output_tokens == max(1, round(x.output_tokens * scale))
    want = inspect_sessions(plain).session_reuse_share
    got = inspect_sessions(scaled).session_reuse_share
    assert want is not None and got is not None and abs(got - want) <= reuse_tol
