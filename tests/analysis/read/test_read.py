"""Reading run directories: strict on bad lines, tolerant of a killed run's tail."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis import ResultError, read_run
from analysis.read import find_run_dirs
from analysis.read._arrow import arrow_columns, arrow_table
from analysis.read._strict import strict_columns
from analysis.schema import RequestColumns
from tests.analysis.builders import make_run, rec
from tests.support.fuzz import examples


def test_reads_columns(tmp_path: Path) -> None:
    run = read_run(make_run(tmp_path, [
        rec(0, chunk_times_s=[11.0, 11.5], chunk_tokens=[1, 9]),
        rec(1, user=3, status="error", error_kind="http_500", first_token_s=None,
            last_token_s=None, output_tokens=0),
    ]))
    r = run.requests
    assert len(r) == 2 and not run.incomplete
    assert list(r.user) == [0, 3]
    assert list(r.status) == ["ok", "error"]
    assert np.isnan(r.first_token_s[1])
    assert list(r.chunk_offsets) == [0, 2, 2]
    assert list(r.chunk_tokens) == [1, 9]
    assert r.error_kind[1] == "http_500" and r.error_kind[0] is None


def test_truncated_last_line_is_readable_and_flagged(tmp_path: Path) -> None:
    run = read_run(make_run(tmp_path, [rec(0), rec(1)], tail=b'{"id": "r2", "user": 0, "se'))
    assert len(run.requests) == 2
    assert run.incomplete
    assert any("last line 3" in x and "truncated" in x for x in run.reasons)


def test_manifest_not_complete_flags_incomplete(tmp_path: Path) -> None:
    run = read_run(make_run(tmp_path, [rec(0)], complete=False))
    assert run.incomplete and "complete is false" in run.reasons[0]


def test_malformed_middle_line_names_file_and_line(tmp_path: Path) -> None:
    d = make_run(tmp_path, [rec(0)])
    good = orjson.dumps(rec(2)) + b"\n"
    with open(d / "requests.jsonl", "ab") as f:
        f.write(b"{broken\n" + good)
    with pytest.raises(ResultError) as exc:
        read_run(d)
    assert exc.value.line == 2
    assert "requests.jsonl:2" in str(exc.value)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"sent_s": "12.0"}, "sent_s"),
        ({"user": True}, "user"),
        ({"status": "fine"}, "status"),
        ({"output_tokens": -1}, "output_tokens"),
        ({"first_token_s": [1]}, "first_token_s"),
        ({"chunk_times_s": [1.0], "chunk_tokens": []}, "chunk_tokens"),
        ({"chunk_times_s": ["x"], "chunk_tokens": [1]}, "chunk_times_s"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_bad_field_names_line_and_field(tmp_path: Path, change: dict, field: str) -> None:
    records = [rec(i) for i in range(5)]
    records[3].update(change)
    with pytest.raises(ResultError) as exc:
        read_run(make_run(tmp_path, records))
    assert exc.value.line == 4
    assert exc.value.field == field
    assert str(exc.value).startswith(str(tmp_path / "requests.jsonl") + ":4")


def test_missing_required_field(tmp_path: Path) -> None:
    records = [rec(0), rec(1)]
    del records[1]["due_s"]
    with pytest.raises(ResultError) as exc:
        read_run(make_run(tmp_path, records))
    assert (exc.value.line, exc.value.field) == (2, "due_s")


def test_blank_lines_keep_line_numbers_right(tmp_path: Path) -> None:
    d = make_run(tmp_path, [rec(0)])
    bad = rec(1, turn="one")
    with open(d / "requests.jsonl", "ab") as f:
        f.write(b"\n\n" + orjson.dumps(bad) + b"\n")
    with pytest.raises(ResultError) as exc:
        read_run(d)
    assert (exc.value.line, exc.value.field) == (4, "turn")


def test_bad_manifest_names_field(tmp_path: Path) -> None:
    d = make_run(tmp_path, [rec(0)])
    m = orjson.loads((d / "run.json").read_bytes())
    m["load"]["users"] = -3
    (d / "run.json").write_bytes(orjson.dumps(m))
    with pytest.raises(ResultError) as exc:
        read_run(d)
    assert exc.value.field == "load.users"


def test_server_metrics_truncated_tail(tmp_path: Path) -> None:
    d = make_run(tmp_path, [rec(0)], metrics=[
        {"t_s": 0.0, "values": {"vllm:prefix_cache_hits_total": 1.0}},
        {"t_s": 5.0, "values": {"vllm:prefix_cache_hits_total": 4.0}},
    ])
    with open(d / "server_metrics.jsonl", "ab") as f:
        f.write(b'{"t_s": 10.0, "val')
    run = read_run(d)
    assert run.incomplete
    assert list(run.metrics.get("vllm:prefix_cache_hits_total")) == [1.0, 4.0]


def test_find_run_dirs_below_a_comparison_dir(tmp_path: Path) -> None:
    make_run(tmp_path / "cmp" / "a", [rec(0)])
    make_run(tmp_path / "cmp" / "b", [rec(0)], run_id="run2")
    assert [p.name for p in find_run_dirs([tmp_path / "cmp"])] == ["a", "b"]
    with pytest.raises(ResultError):
        find_run_dirs([tmp_path / "nothing"])


def _many(n: int) -> list[dict]:
    return [rec(i, user=i % 7, chunk_times_s=[11.0 + i, 11.5 + i], chunk_tokens=[1, 9])
            for i in range(n)]


def _strict(d: Path) -> RequestColumns:
    return strict_columns((d / "requests.jsonl").read_bytes(), str(d / "requests.jsonl"))


def _same(a: RequestColumns, b: RequestColumns) -> None:
    for name in RequestColumns.__dataclass_fields__:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype, name
        assert x.tolist() == y.tolist() or np.array_equal(x, y, equal_nan=True), name


def test_fast_path_matches_the_strict_reader(tmp_path: Path) -> None:
    records = _many(3000)
    records[5].update(agent="sub0", lane="5/sub0", kind="tool", phase="warmup")
    records[6].update(status="error", error_kind="http_500", error_message="boom",
                      http_status=500, first_token_s=None, last_token_s=None,
                      chunk_times_s=None, chunk_tokens=None, cached_tokens=None)
    records[7].update(lane=None, think_applied_s=None, prompt_tokens_server=77)
    d = make_run(tmp_path, records)
    data = (d / "requests.jsonl").read_bytes()
    fast = arrow_columns(arrow_table(memoryview(data)), len(records))
    assert fast is not None  # the fast path took it
    _same(fast, _strict(d))
    assert fast.lane[7] == "" and fast.think_applied_s[7] == 0.0  # null means the default
    assert list(fast.phase[4:6]) == ["measure", "warmup"]
    assert fast.agent[5] == "sub0" and fast.agent[4] is None
    assert list(fast.chunk_offsets[5:9]) == [10, 12, 12, 14]  # record 6: none


@pytest.mark.parametrize(
    "change",
    [{"user": 1.0}, {"user": 2**63}, {"turn": None}, {"chunk_tokens": [1, None]},
     {"chunk_times_s": 0}, {"status": "fine"}, {"lane": 3}],
)
def test_what_pyarrow_refuses_gets_the_strict_message(tmp_path: Path, change: dict) -> None:
    records = _many(50)
    records[40].update(change)
    d = make_run(tmp_path, records)
    data = (d / "requests.jsonl").read_bytes()
    assert arrow_columns(arrow_table(memoryview(data)), len(records)) is None
    with pytest.raises(ResultError) as exc:
        read_run(d)
    assert exc.value.line == 41 and exc.value.field == next(iter(change))
    with pytest.raises(ResultError):
        _strict(d)


def test_two_objects_on_one_line_are_not_two_records(tmp_path: Path) -> None:
    d = make_run(tmp_path, [])
    a, b = orjson.dumps(rec(0)), orjson.dumps(rec(1))
    (d / "requests.jsonl").write_bytes(a + b"\n" + a + b + b"\n" + b + b"\n")
    with pytest.raises(ResultError) as exc:
        read_run(d)
    assert exc.value.line == 2


def test_errors_deep_in_a_big_file_keep_absolute_line_numbers(tmp_path: Path) -> None:
    records = _many(30_000)  # more than one batch of the strict reader
    records[25_000]["turn"] = "x"
    with pytest.raises(ResultError) as exc:
        read_run(make_run(tmp_path / "a", records))
    assert (exc.value.line, exc.value.field) == (25_001, "turn")
    # a cut tail is tolerated; the same cut before more lines is not
    run = read_run(make_run(tmp_path / "b", _many(3000), tail=b'{"id": "cut'))
    assert run.incomplete and "last line 3001" in run.reasons[0]
    assert len(run.requests) == 3000
    lines = [orjson.dumps(r) for r in _many(3000)]
    lines[1200] = lines[1200][:20]
    d = make_run(tmp_path / "c", [])
    (d / "requests.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(ResultError) as exc:
        read_run(d)
    assert exc.value.line == 1201


def test_blank_lines_and_crlf_read_like_the_strict_reader(tmp_path: Path) -> None:
    d = make_run(tmp_path, [])
    lines = [orjson.dumps(r) for r in _many(20)]
    (d / "requests.jsonl").write_bytes(b"\r\n".join(lines[:10]) + b"\r\n\n  \n"
                                       + b"\n".join(lines[10:]))
    run = read_run(d)
    assert len(run.requests) == 20 and not run.incomplete
    _same(run.requests, _strict(d))


def test_cut_tail_followed_only_by_blank_lines(tmp_path: Path) -> None:
    run = read_run(make_run(tmp_path, [rec(0)], tail=b'{"id": "r1", "us\n\n'))
    assert run.incomplete and len(run.requests) == 1


_ODD = [None, 0, -1, 1, 1.0, 1.5, -0.0, "", "x", "ok", True, [], [1], [1.5], [None], {},
        2**63, -(2**63), 2**64 - 1, "measure"]
_FIELDS_TO_BREAK = sorted(RequestColumns.__dataclass_fields__.keys() - {"chunk_offsets"})


@settings(max_examples=examples(150), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    n=st.integers(1, 6),
    changes=st.lists(st.tuples(st.integers(0, 5), st.sampled_from(_FIELDS_TO_BREAK),
                               st.sampled_from(_ODD) | st.just("<drop>")), max_size=3),
    separator=st.sampled_from([b"\n", b"\r\n"]),
    blank_at=st.none() | st.integers(0, 5),
)
def test_fast_and_strict_readers_agree_on_any_input(
    tmp_path: Path, n: int, changes: list, separator: bytes, blank_at: int | None
) -> None:
    """Whatever the bytes, read_run gives the strict reader's columns or its error."""
    records = _many(n)
    for i, name, value in changes:
        if i < n:
            if value == "<drop>":
                records[i].pop(name, None)
            else:
                records[i][name] = value
    lines = [orjson.dumps(r) for r in records]
    if blank_at is not None:
        lines.insert(min(blank_at, n), b"")
    d = make_run(tmp_path / str(uuid.uuid4()), [])
    lines.append(orjson.dumps(rec(99)))  # a sound last line: no line is taken for a cut tail
    (d / "requests.jsonl").write_bytes(separator.join(lines) + separator)

    def outcome(read: Callable[[], RequestColumns]) -> RequestColumns | tuple:
        try:
            return read()
        except ResultError as exc:
            return (exc.line, exc.field)

    fast = outcome(lambda: read_run(d).requests)
    strict = outcome(lambda: _strict(d))
    if isinstance(strict, tuple):
        assert fast == strict
    else:
        assert not isinstance(fast, tuple), fast
        _same(fast, strict)
