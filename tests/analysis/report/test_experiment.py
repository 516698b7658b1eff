"""Experiment files: compare flags to TOML and back, refused mistakes, and the file
stored with results shown in the report (its SLO tiers used)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from replay.ab import load_experiment
from replay.cli import main
from tests.analysis.report.builders import make_sweep

ARGS = ["compare", "--arm", "auto=http://127.0.0.1:1", "--arm", "ls=http://127.0.0.1:2",
        "--workload", "wl.jsonl", "--duration", "5", "--warmup", "2", "--users", "1,4",
        "--think-scale", "0.5", "--out", "res"]


def test_save_config_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    first = tmp_path / "first.toml"
    assert main([*ARGS, "--save-config", str(first)]) == 0
    assert "agentreplay compare --config" in capsys.readouterr().out
    data = load_experiment(first)
    assert data["arm"] == ["auto=http://127.0.0.1:1", "ls=http://127.0.0.1:2"]
    assert data["users"] == "1,4" and data["duration"] == 5.0 and data["think_scale"] == 0.5
    assert data["workload"] == str(tmp_path / "wl.jsonl")  # absolute: reruns from anywhere
    assert "drain" not in data  # defaults stay out of the file
    assert not (tmp_path / "res").exists()  # --save-config runs nothing
    again = tmp_path / "again.toml"
    assert main(["compare", "--config", str(first), "--save-config", str(again)]) == 0
    assert again.read_text() == first.read_text()
    changed = tmp_path / "changed.toml"
    assert main(["compare", "--config", str(first), "--duration", "9",
                 "--save-config", str(changed)]) == 0
    diff = set(changed.read_text().splitlines()) ^ set(first.read_text().splitlines())
    assert diff == {"duration = 9.0", "duration = 5.0"}  # the flag overrides the file


@pytest.mark.parametrize(("text", "words"), [
    ('bogus = 1\n', ["unknown key 'bogus'"]),
    ('duration = "long"\n', ["duration", "must be a int or float"]),
    ('arm = "auto=http://x"\n', ["arm", "must be a list"]),
    ('format_version = 9\n', ["format_version 9"]),
    ('duration = \n', ["not valid TOML"]),
])
def test_bad_experiment_files_exit_2_naming_file_and_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, words: list[str]) -> None:
    path = tmp_path / "exp.toml"
    path.write_text(text)
    assert main(["compare", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and "Traceback" not in err
    for w in words:
        assert w in err


def test_missing_required_flag_names_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--workload", "w.jsonl", "--duration", "1", "--out", "o"]) == 2
    assert "--arm is required" in capsys.readouterr().err


def test_report_shows_the_stored_experiment_and_uses_its_tiers(tmp_path: Path) -> None:
    root = make_sweep(tmp_path / "cmp", levels=(1, 4))
    (root / "experiment.toml").write_text(
        'format_version = 1\narm = ["auto=http://h:1", "latency_specialized=http://h:2"]\n'
        'workload = "wl.jsonl"\nduration = 5.0\nslo = ["42:7"]\n', encoding="utf-8")
    assert main(["report", str(root), "--no-charts"]) in (0, 3)
    html = (root / "report.html").read_text(encoding="utf-8")
    assert '<section id="experiment">' in html and "agentreplay compare --config" in html
    assert 'slo = ["42:7"]' in html.replace("&#34;", '"')  # the file, escaped
    summary = orjson.loads((root / "summary.json").read_bytes())
    assert summary["tiers"] == [{"floor_tok_s": 42.0, "ttft_s": 7.0}]
