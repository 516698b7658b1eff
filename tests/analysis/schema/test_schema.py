"""The request record is described once: every derived table follows the model."""

from __future__ import annotations

import csv
import io
from dataclasses import fields
from pathlib import Path
from typing import get_type_hints

import pytest
from pydantic import ValidationError

from analysis import (
    RecordDict,
    RequestRecord,
    ResultError,
    read_run,
    record_latencies,
)
from analysis.metrics import column_latencies
from analysis.read._arrow import arrow_schema
from analysis.report import CSV_COLUMNS, requests_csv
from analysis.schema import RequestColumns
from analysis.schema._columns import DEFAULTS, FIELDS, KNOWN, LISTS, NONNEGATIVE
from tests.analysis.builders import make_run, rec

MODEL = list(RequestRecord.model_fields)


def test_record_dict_has_exactly_the_model_fields() -> None:
    assert list(get_type_hints(RecordDict)) == MODEL


def test_columns_have_exactly_the_model_fields() -> None:
    assert [f.name for f in fields(RequestColumns) if f.name != "chunk_offsets"] == MODEL


def test_reader_tables_follow_the_model() -> None:
    assert arrow_schema().names == [n for n in MODEL if n not in LISTS] + list(LISTS)
    assert KNOWN == set(MODEL)
    assert set(FIELDS) | set(LISTS) == set(MODEL)
    required = {n for n, f in RequestRecord.model_fields.items() if f.is_required()}
    assert {n for n, (_, req, _) in FIELDS.items() if req} == required
    assert set(DEFAULTS) == set(MODEL) - required
    assert {"user", "turn", "prompt_tokens", "output_tokens"} <= set(NONNEGATIVE)


def test_csv_has_every_scalar_field_and_the_derived_values() -> None:
    for name in MODEL:
        assert (name in CSV_COLUMNS) == (name not in LISTS), name
    for name in ("ttft_s", "ttft_due_s", "e2e_s", "tpot_s", "decode_time_s"):
        assert name in CSV_COLUMNS


def test_one_formula_for_derived_values(tmp_path: Path) -> None:
    r = rec(0, due_s=9.5, output_tokens=11, end_s=12.5)
    run = read_run(make_run(tmp_path, [r]))
    cols = column_latencies(run.requests)
    one = record_latencies(RequestRecord.model_validate(r).model_dump())  # type: ignore[arg-type]
    assert (one.ttft, one.ttft_due, one.e2e) == (1.0, 1.5, 2.0)
    assert one.tpot == pytest.approx(0.1)
    for name in ("ttft", "ttft_due", "e2e", "decode_time", "tpot"):
        assert getattr(cols, name)[0] == pytest.approx(getattr(one, name))
    row = next(csv.DictReader(io.StringIO(requests_csv([run]))))
    assert float(row["tpot_s"]) == pytest.approx(0.1)
    assert float(row["ttft_due_s"]) == pytest.approx(1.5)


def test_csv_cells_cannot_be_formulas(tmp_path: Path) -> None:
    bad = ["=HYPERLINK(\"x\")", "+1", "-2", "@SUM(A1)", "\tx", "\rx"]
    records = [rec(i, status="error", error_kind="http_500", error_message=m, session=m,
                   first_token_s=None, last_token_s=None, output_tokens=0)
               for i, m in enumerate(bad)]
    run = read_run(make_run(tmp_path, records, label="=cmd|' /C calc'!A0"))
    rows = list(csv.DictReader(io.StringIO(requests_csv([run]), newline="")))
    for row, text in zip(rows, bad, strict=True):
        assert row["error_message"] == "'" + text
        assert row["session"] == "'" + text
        assert row["arm"].startswith("'=")
    assert rows[0]["due_s"] == "10.0"  # numbers stay numbers


def test_error_kinds_are_a_closed_vocabulary() -> None:
    base = rec(0, status="error", first_token_s=None, last_token_s=None, output_tokens=0)
    for kind in ("http_503", "timeout_itl", "redirect", "bad_usage", "cancelled_interrupt"):
        RequestRecord.model_validate({**base, "error_kind": kind})
    with pytest.raises(ValidationError, match="unknown error kind"):
        RequestRecord.model_validate({**base, "error_kind": "oops"})
    with pytest.raises(ValidationError):
        RequestRecord.model_validate({**base, "status": "cancelled_drain"})


@pytest.mark.parametrize("version", [1, 3, 99])
def test_other_format_versions_are_refused(tmp_path: Path, version: int) -> None:
    d = make_run(tmp_path, [rec(0)])
    text = (d / "run.json").read_text().replace('"run_id"', f'"format_version":{version},'
                                                '"run_id"', 1)
    (d / "run.json").write_text(text)
    with pytest.raises(ResultError) as exc:
        read_run(d)
    msg = str(exc.value)
    assert "run.json" in msg and "format_version" in msg and f"format version {version}" in msg
    assert "\n" not in msg


def test_window_ending_before_it_starts_is_refused(tmp_path: Path) -> None:
    d = make_run(tmp_path, [rec(0)])
    text = (d / "run.json").read_text().replace('"end_s":110.0', '"end_s":5.0')
    (d / "run.json").write_text(text)
    with pytest.raises(ResultError, match="window ends"):
        read_run(d)


def test_only_a_closed_loop_run_has_a_user_count() -> None:
    """A rate or timestamp run's load is its rate or time scale: an older run.json's
    ``users: 0`` (or the --users it was launched with) reads as no user count, and its
    level is still its rate; a closed-loop load without users is refused."""
    from analysis.schema import LoadSettings

    base = {"duration_s": 10.0, "warmup_s": 1.0, "drain_s": 1.0}
    for stored in (0, 5):
        old = LoadSettings.model_validate({**base, "users": stored, "arrival": "open",
                                           "rate": 2.0})
        assert old.users is None and old.rate == 2.0
    assert LoadSettings.model_validate({**base, "users": 3}).users == 3
    with pytest.raises(ValidationError, match="closed-loop run needs its users"):
        LoadSettings.model_validate(base)
