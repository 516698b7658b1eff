"""Issue 25: every CSV the tool writes (requests.csv and levels.csv) neutralises text
cells a spreadsheet would run as a formula; an arm label ``@SUM(1+1)`` or ``-2+3``
reaches levels.csv as text."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests.analysis.builders import make_run, rec
from tests.support.commands import call as _call
from tests.support.runs import is_number


@pytest.mark.parametrize("label", ["@SUM(1+1)", "-2+3", "=HYPERLINK(\"x\")", "+A1"])
def test_a_formula_label_is_text_in_every_csv(tmp_path: Path, label: str) -> None:
    run = make_run(tmp_path / "run", [rec(i) for i in range(4)], label=label)
    code, err = _call(["report", str(run), "--no-charts"])
    assert code in (0, 3), err
    for name in ("levels.csv", "requests.csv"):
        with open(run / name, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        assert rows, name
        assert all(r["arm"] == "'" + label for r in rows), (name, rows[0]["arm"])
        for row in rows:
            for cell in filter(None, row.values()):
                assert cell[0] not in "=@\t\r" and not (
                    cell[0] in "+-" and not is_number(cell)), (name, cell)
