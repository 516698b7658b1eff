"""WEKA subagent timing and duplicates, against the raw JSON read independently.

A subagent entry's ``t`` is when it finished (SOURCES.md): spawn = t - duration.
The parent's pause after blocking subagents is ``next.t - last_subagent.t``;
a background subagent (``duration_ms: null``) does not delay its parent. In the
absolute shape (nested ``t`` in session time, AgentX's current captures) the entry's
``t`` is the spawn instead: the same session written either way imports the same.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from traces import Request, import_weka


def _expected(raw: list[dict[str, Any]], first_think: float = 0.0
              ) -> list[tuple[float, list[tuple[float, bool, list[Any]]]]]:
    """(think before each plain request, its subagents (spawn delay, background, sub))."""
    plain: list[dict[str, Any]] = []
    subs: list[list[dict[str, Any]]] = []
    for r in raw:
        if r.get("type") == "subagent":
            subs[-1].append(r)
        else:
            plain.append(r)
            subs.append([])
    out = []
    for i, r in enumerate(plain):
        if i == 0:
            think = first_think
        else:
            blocking = [s["t"] for s in subs[i - 1] if s.get("duration_ms") is not None]
            think = r["t"] - max(blocking) if blocking else r["think_time"]
        mine = []
        for s in subs[i]:
            if s.get("duration_ms") is None:
                delay = 0.0
            else:
                delay = s["t"] - s["duration_ms"] / 1000 - (r["t"] + r["api_time"])
            mine.append((max(0.0, delay), s.get("duration_ms") is None,
                         _expected(s["requests"], max(0.0, delay))))
        out.append((max(0.0, think), mine))
    return out


def _check(reqs: tuple[Request, ...], want: list[Any]) -> None:
    assert len(reqs) == len(want)
    for req, (think, subs) in zip(reqs, want, strict=True):
        assert req.think_time_s == pytest.approx(think, abs=1e-3)
        assert len(req.subagents) == len(subs)
        for sub, (_, background, inner) in zip(req.subagents, subs, strict=True):
            assert sub.background == background
            _check(sub.requests, inner)


@pytest.mark.parametrize("name", ["trace_0277", "trace_0291"])
def test_subagent_pauses_follow_finish_times(sample_traces: Path, name: str) -> None:
    path = sample_traces / "weka" / f"{name}.json"
    raw = json.loads(path.read_text())["requests"]
    (session,) = import_weka(path).sessions
    _check(session.requests, _expected(raw))
    assert any(r.subagents for r in session.requests)


def test_trace_0277_worked_example(sample_traces: Path) -> None:
    """The example of SOURCES.md, by hand: three subagents spawned together at ~19.5 s."""
    (session,) = import_weka(sample_traces / "weka" / "trace_0277.json").sessions
    first = session.requests[0]
    assert len(first.subagents) == 3
    for sub, (t, dur) in zip(first.subagents, [(79.224, 59750), (183.906, 164445),
                                               (211.347, 191873)], strict=True):
        spawn = t - dur / 1000
        assert 19.4 < spawn < 19.5
        assert sub.requests[0].think_time_s == pytest.approx(spawn - 18.78, abs=1e-3)
    assert session.requests[1].think_time_s == pytest.approx(228 - 211.347, abs=1e-3)


def _absolute(obj: dict[str, Any]) -> dict[str, Any]:
    """The session rewritten in the absolute shape: each subagent entry's ``t`` its
    spawn (finish - duration) and its requests' ``t`` in session time."""
    out = json.loads(json.dumps(obj))
    for r in out["requests"]:
        if r.get("type") == "subagent":
            spawn = r["t"] - r["duration_ms"] / 1000
            r["t"] = spawn
            for inner in r["requests"]:
                inner["t"] = spawn + inner["t"]
    return out


def _shape(reqs: tuple[Request, ...]) -> list[Any]:
    return [(r.prompt_tokens, r.output_tokens, r.new_block_ids[-3:], r.think_time_s,
             [(s.id, s.background, _shape(s.requests)) for s in r.subagents]) for r in reqs]


def _close(a: Any, b: Any) -> None:
    if isinstance(a, float):
        assert a == pytest.approx(b, abs=2e-3)
    elif isinstance(a, list | tuple) and not isinstance(a, str):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _close(x, y)
    else:
        assert a == b


@pytest.mark.parametrize("name", ["trace_0277", "trace_0291"])
def test_absolute_subagent_times_import_like_relative_ones(sample_traces: Path,
                                                          tmp_path: Path, name: str) -> None:
    obj = json.loads((sample_traces / "weka" / f"{name}.json").read_text())
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(_absolute(obj)))
    (relative,) = import_weka(sample_traces / "weka" / f"{name}.json").sessions
    (absolute,) = import_weka(path).sessions
    _close(_shape(absolute.requests), _shape(relative.requests))
    if name == "trace_0277":  # SOURCES.md's example: 16.7 s after the last one finished
        assert absolute.requests[1].think_time_s == pytest.approx(228 - 211.347, abs=1e-3)
        assert absolute.requests[0].subagents[2].requests[0].think_time_s == \
            pytest.approx(211.347 - 191.873 - 18.78, abs=1e-3)


def test_background_subagent_does_not_delay_parent(sample_traces: Path, tmp_path: Path
                                                   ) -> None:
    obj = json.loads((sample_traces / "weka" / "trace_0277.json").read_text())
    obj["requests"][3]["duration_ms"] = None  # the last of the three finished at 211.347
    path = tmp_path / "bg.json"
    path.write_text(json.dumps(obj))
    (session,) = import_weka(path).sessions
    subs = session.requests[0].subagents
    assert [s.background for s in subs] == [False, False, True]
    assert session.requests[1].think_time_s == pytest.approx(228 - 183.906, abs=1e-3)
    for sub in obj["requests"][1:3]:
        sub["duration_ms"] = None
    path.write_text(json.dumps(obj))
    (session,) = import_weka(path).sessions
    assert session.requests[1].think_time_s == obj["requests"][4]["think_time"]  # 209 s


def test_duplicates_counted_kept_or_dropped(sample_traces: Path, tmp_path: Path) -> None:
    src = sample_traces / "weka"
    for f in ("trace_0103.json", "trace_0174.json"):
        shutil.copy(src / f, tmp_path / f)
    shutil.copy(src / "trace_0103.json", tmp_path / "copy_a.json")
    shutil.copy(src / "trace_0103.json", tmp_path / "copy_b.json")
    kept = import_weka(tmp_path)
    assert len(list(kept.sessions)) == 4
    assert kept.header().params["duplicate_sessions"] == 2
    assert kept.header().params["dedupe"] is False
    dropped = import_weka(tmp_path, dedupe=True)
    ids = [s.id for s in dropped.sessions]
    assert len(ids) == 2
    assert dropped.header().params["duplicate_sessions"] == 2


def test_cli_import_reports_duplicates(sample_traces: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    from replay.cli import main
    from traces import read_header

    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(sample_traces / "weka" / "trace_0103.json", src / "a.json")
    shutil.copy(sample_traces / "weka" / "trace_0103.json", src / "b.json")
    out = tmp_path / "w.jsonl"
    assert main(["traces", "import", "--format", "weka", str(src), "-o", str(out)]) == 0
    assert "1 duplicate session (same content" in capsys.readouterr().out
    assert read_header(out).sessions == 2
    assert main(["traces", "inspect", str(out)]) == 0
    assert "duplicate sessions" in capsys.readouterr().out
    assert main(["traces", "import", "--format", "weka", str(src), "-o", str(out),
                 "--dedupe", "--force"]) == 0  # replacing the first import: --force
    assert "dropped" in capsys.readouterr().out
    assert read_header(out).sessions == 1
    assert main(["traces", "import", "--format", "azure", str(src / "a.json"), "-o",
                 str(out), "--dedupe", "--force"]) == 2


def test_tracelab_duplicate_sessions(sample_traces: Path, tmp_path: Path) -> None:
    from traces import import_tracelab

    rows = [json.loads(x) for x in
            (sample_traces / "tracelab" / "round_trace.jsonl").read_text().splitlines() if x]
    first = rows[0]["session_id"]
    copy = [{**r, "session_id": "copy-of-" + first} for r in rows if r["session_id"] == first]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows + copy))
    n = len({r["session_id"] for r in rows})
    kept = import_tracelab(path)
    assert len(list(kept.sessions)) == n + 1
    assert kept.header().params["duplicate_sessions"] == 1
    dropped = import_tracelab(path, dedupe=True)
    assert [s.id for s in dropped.sessions].count("copy-of-" + first) == 0
    assert dropped.header().params["duplicate_sessions"] == 1
