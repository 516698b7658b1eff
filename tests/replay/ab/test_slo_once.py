"""SLO tiers set once: compare --slo (or the experiment file's slo) judges the run's
report, summary.json and a later `report DIR` alike; `report DIR --slo` re-judges and
says so; a bad tier is one line naming the flag."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from replay.cli import main
from tests.replay.ab.conftest import sims


def _tiers(out: Path) -> list[str]:
    summary = orjson.loads((out / "summary.json").read_bytes())
    return [f"{t['floor_tok_s']:g}:{t['ttft_s']:g}" for t in summary["tiers"]]


@pytest.mark.sim
def test_experiment_slo_and_compare_slo_drive_the_report_and_report_dir(
        tiny_workload: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cmp"
    with sims(("small", "auto"), ("small", "latency_specialized")) as urls:
        exp = tmp_path / "exp.toml"
        exp.write_text(f'arm = ["auto={urls[0]}", "latency_specialized={urls[1]}"]\n'
                       f'workload = "{tiny_workload}"\nout = "{out}"\nusers = "1"\n'
                       'duration = 1.0\nwarmup = 0.2\ndrain = 0.5\nslo = ["50:5", "20:3"]\n')
        assert main(["compare", "--config", str(exp), "--quiet"]) in (0, 3)
        assert _tiers(out) == ["50:5", "20:3"]  # the run's own report, not the defaults
        started = {p.name: (p / "run.json").read_bytes() for p in (out / "runs").iterdir()}
        # report DIR judges the same tiers, and says nothing of re-judging
        capsys.readouterr()
        assert main(["report", str(out), "--no-charts"]) in (0, 3)
        assert _tiers(out) == ["50:5", "20:3"]
        assert "re-judged" not in capsys.readouterr().err
        # compare --slo on the same directory: the runs are reused (judging changes no
        # run), the report is judged at the flag's tier. The race, stated: a run stamped
        # invalid (a starved simulator) is redone by any compare, so only the others are
        # held to be reused unchanged
        kept = {name: doc for name, doc in started.items()
                if (orjson.loads(doc).get("validity") or {}).get("verdict") != "invalid"}
        assert main(["compare", "--config", str(exp), "--quiet", "--slo", "10:2"]) in (0, 3)
        assert _tiers(out) == ["10:2"]
        now = {p.name: (p / "run.json").read_bytes() for p in (out / "runs").iterdir()}
        assert set(now) == set(started)
        assert {name: now[name] for name in kept} == kept
    # report DIR --slo with other tiers than the run's: re-judged, said in both places
    capsys.readouterr()
    assert main(["report", str(out), "--no-charts", "--slo", "40:4"]) in (0, 3)
    err = capsys.readouterr().err
    assert "re-judged: --slo 40:4 instead of the SLO tiers the comparison was run with" in err
    assert _tiers(out) == ["40:4"]
    assert "SLO tiers re-judged" in (out / "report.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("bad", ["100", "fast:5", "100:", "-1:5"])
def test_a_bad_compare_slo_is_one_line_naming_the_flag(
        bad: str, tiny_workload: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["compare", "--arm", "a=http://127.0.0.1:9", "--arm", "b=http://127.0.0.1:9",
                 "--workload", str(tiny_workload), "--out", str(tmp_path / "c"),
                 "--duration", "1", f"--slo={bad}"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"--slo {bad!r}: give FLOOR:TTFT" in err
    assert not (tmp_path / "c").exists()
