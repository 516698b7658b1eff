"""Workload files: round trip, fingerprint, and precise errors."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from traces import (
    Request,
    Session,
    TraceError,
    WorkloadHeader,
    generate,
    iter_sessions,
    read_header,
    read_workload,
    validate_workload,
    write_workload,
)


def _session(sid: str = "a") -> Session:
    return Session(
        id=sid,
        requests=(
            Request(prompt_tokens=100, output_tokens=5, new_block_ids=(1, 2), shared_blocks=1),
            Request(prompt_tokens=150, output_tokens=7, prefix_blocks=1,
                    new_block_ids=(3, 4), think_time_s=1.5, kind="tool_result"),
        ),
    )


def _header() -> WorkloadHeader:
    return WorkloadHeader(source="test", block_size=64)


def test_round_trip_keeps_sessions_and_sets_count_and_fingerprint(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    sessions = [_session("a"), _session("b")]
    head = write_workload(path, _header(), iter(sessions))
    assert head.sessions == 2
    assert len(head.fingerprint) == 64
    loaded = read_workload(path)
    assert list(loaded.sessions) == sessions
    assert read_header(path) == head
    assert validate_workload(path).fingerprint == head.fingerprint
    assert not list(tmp_path.glob(".w.jsonl.*"))  # temp files cleaned up


def test_fingerprint_depends_on_content_only(tmp_path: Path) -> None:
    a = write_workload(tmp_path / "a.jsonl", _header(), [_session()])
    b = write_workload(tmp_path / "b.jsonl",
                       WorkloadHeader(source="other", seed=9, block_size=64), [_session()])
    c = write_workload(tmp_path / "c.jsonl", _header(), [_session("z")])
    d = write_workload(tmp_path / "d.jsonl",
                       WorkloadHeader(source="test", block_size=64, arrival="open"),
                       [_session()])
    assert a.fingerprint == b.fingerprint  # labels are not content
    assert a.fingerprint != c.fingerprint
    assert a.fingerprint != d.fingerprint


def test_reformatted_line_still_verifies(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    write_workload(path, _header(), [_session()])
    head, body = path.read_bytes().splitlines()
    pretty = orjson.dumps(orjson.loads(body))  # same content, keys in another order
    obj = orjson.loads(body)
    reordered = orjson.dumps(dict(reversed(list(obj.items()))))
    assert reordered != body or pretty == body
    path.write_bytes(head + b"\n" + reordered + b"\n")
    assert [s.id for s in iter_sessions(path)] == ["a"]


def test_edited_content_fails_fingerprint(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    write_workload(path, _header(), [_session()])
    path.write_bytes(path.read_bytes().replace(b'"output_tokens":5', b'"output_tokens":6'))
    with pytest.raises(TraceError) as err:
        list(iter_sessions(path))
    assert err.value.field == "fingerprint" and err.value.line == 1


def test_missing_session_fails_count(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    write_workload(path, _header(), [_session("a"), _session("b")])
    lines = path.read_bytes().splitlines()
    path.write_bytes(b"\n".join(lines[:2]) + b"\n")
    with pytest.raises(TraceError) as err:
        validate_workload(path)
    assert err.value.field == "sessions"


@pytest.mark.parametrize(
    ("mutate", "line", "field"),
    [
        (lambda s: s["requests"][1].update(new_block_ids=[3]), 2, "requests.1.new_block_ids"),
        (lambda s: s["requests"][1].update(prefix_blocks=3, new_block_ids=[]), 2,
         "requests.1.prefix_blocks"),
        (lambda s: s["requests"][0].update(prefix_blocks=1, new_block_ids=[2]), 2,
         "requests.0.prefix_blocks"),
        (lambda s: s["requests"][1].update(output_tokens=-1), 2, "requests.1.output_tokens"),
        (lambda s: s["requests"][0].update(prompt_tokens="many"), 2,
         "requests.0.prompt_tokens"),
        (lambda s: s.pop("id"), 2, "id"),
    ],
)
def test_inconsistent_session_names_line_and_field(
    tmp_path: Path, mutate: object, line: int, field: str
) -> None:
    obj = orjson.loads(orjson.dumps(_session().model_dump(mode="json")))
    mutate(obj)  # type: ignore[operator]
    head = _header().model_copy(update={"fingerprint": "0" * 64, "sessions": 1})
    path = tmp_path / "w.jsonl"
    path.write_bytes(orjson.dumps(head.model_dump(mode="json")) + b"\n" + orjson.dumps(obj))
    with pytest.raises(TraceError) as err:
        list(iter_sessions(path))
    assert (err.value.line, err.value.field) == (line, field)
    assert str(path) in str(err.value)


def test_prefix_longer_than_previous_request(tmp_path: Path) -> None:
    s = Session(id="x", requests=(
        Request(prompt_tokens=64, output_tokens=1, new_block_ids=(1,)),
        Request(prompt_tokens=192, output_tokens=1, prefix_blocks=2, new_block_ids=(5,)),
    ))
    with pytest.raises(TraceError) as err:  # the writer refuses it too
        write_workload(tmp_path / "w.jsonl", _header(), [s])
    assert err.value.field == "requests.1.prefix_blocks"
    assert not (tmp_path / "w.jsonl").exists()


@pytest.mark.parametrize(
    ("content", "line", "field"),
    [
        (b"", 1, "header"),
        (b"\n", 1, "header"),
        (b"{not json\n", 1, None),
        (b"[1, 2]\n", 1, None),
        (b'{"kind": "something-else"}\n', 1, "kind"),
        (b'{"kind": "agentreplay-workload", "source": "x", "block_size": 0, '
         b'"fingerprint": "ab"}\n', 1, "block_size"),
        (b'{"kind": "agentreplay-workload", "source": "x", "block_size": 64}\n', 1,
         "fingerprint"),
        (b'{"kind": "agentreplay-workload", "format_version": 99, "new_field": 1}\n', 1,
         "format_version"),
    ],
)
def test_bad_header(tmp_path: Path, content: bytes, line: int, field: str | None) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(TraceError) as err:
        list(iter_sessions(path))
    assert (err.value.file, err.value.line, err.value.field) == (str(path), line, field)


def test_bad_json_body_line_is_located(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    write_workload(path, _header(), [_session("a"), _session("b")])
    lines = path.read_bytes().splitlines()
    lines[2] = lines[2][:-5]
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(TraceError) as err:
        list(iter_sessions(path))
    assert err.value.line == 3 and "invalid JSON" in str(err.value)


def test_missing_file_is_a_trace_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError):
        read_header(tmp_path / "nope.jsonl")


def test_generated_workload_streams_back_identically(tmp_path: Path) -> None:
    header, sessions = generate(sessions=15, seed=4)
    originals = list(sessions)
    path = tmp_path / "g.jsonl"
    write_workload(path, header, iter(originals))
    assert list(iter_sessions(path)) == originals
