"""Reading run directories: strict on bad lines, tolerant of a killed run's tail."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from analysis import ResultError, find_run_dirs, read_run
from tests.analysis.builders import make_run, rec


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


def test_parallel_ranges_match_serial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import analysis._read as R

    d = make_run(tmp_path, _many(3000))
    serial = read_run(d).requests
    monkeypatch.setattr(R, "_PARALLEL_BYTES", 0)
    monkeypatch.setattr(R, "_BLOCK_BYTES", 4096)  # many blocks per range too
    parallel = read_run(d).requests
    for name in ("user", "sent_s", "chunk_offsets", "chunk_times_s", "chunk_tokens"):
        assert np.array_equal(getattr(serial, name), getattr(parallel, name))
    assert list(parallel.id) == [f"r{i}" for i in range(3000)]


def test_parallel_errors_keep_absolute_line_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import analysis._read as R

    monkeypatch.setattr(R, "_PARALLEL_BYTES", 0)
    monkeypatch.setattr(R, "_BLOCK_BYTES", 4096)
    records = _many(3000)
    records[2500]["turn"] = "x"
    with pytest.raises(ResultError) as exc:
        read_run(make_run(tmp_path / "a", records))
    assert (exc.value.line, exc.value.field) == (2501, "turn")
    # a cut tail in the last range is tolerated; the same cut before more lines is not
    run = read_run(make_run(tmp_path / "b", _many(3000), tail=b'{"id": "cut'))
    assert run.incomplete and "last line 3001" in run.reasons[0]
    lines = [orjson.dumps(r) for r in _many(3000)]
    lines[1200] = lines[1200][:20]
    d = make_run(tmp_path / "c", [])
    (d / "requests.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(ResultError) as exc:
        read_run(d)
    assert exc.value.line == 1201


def test_cut_tail_followed_only_by_blank_lines(tmp_path: Path) -> None:
    run = read_run(make_run(tmp_path, [rec(0)], tail=b'{"id": "r1", "us\n\n'))
    assert run.incomplete and len(run.requests) == 1
