"""Issue 25: every file the tool reads is decoded with one clear error naming the
file (and line or field): a non-UTF-8 ``--config`` or stored experiment.toml, a
comparison.json that holds a JSON list, a sim profile in another encoding."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.analysis.builders import make_run, rec
from tests.support.commands import call as _call
from tests.support.workloads import make_workload

_DEAD = "http://127.0.0.1:1"


def _one_line(code: int, err: str, *words: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.startswith("agentreplay: error: ")]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert all(w in lines[0] for w in words), (words, lines[0])


def test_a_config_that_is_not_utf8(tmp_path: Path) -> None:
    conf = tmp_path / "exp.toml"
    conf.write_bytes(b'duration = 5\nworkload = "caf\xe9.jsonl"\n')
    _one_line(*_call(["compare", "--config", str(conf)]), "--config", str(conf), "line 2",
              "UTF-8")


@pytest.mark.parametrize("state", [b"[1, 2]", b'{"settings": [], "runs": {}}'])
def test_a_comparison_state_that_is_not_an_object(tmp_path: Path, state: bytes) -> None:
    wl = make_workload(tmp_path / "wl.jsonl", sessions=1, turns=1)
    out = tmp_path / "cmp"
    out.mkdir()
    (out / "comparison.json").write_bytes(state)
    _one_line(*_call(["compare", "--arm", f"a={_DEAD}", "--arm", f"b={_DEAD}", "--workload",
                      str(wl), "--duration", "1", "--out", str(out), "--quiet"]),
              str(out / "comparison.json"), "not a JSON object")


def test_a_sim_profile_that_is_not_utf8(tmp_path: Path) -> None:
    prof = tmp_path / "p.json"
    prof.write_bytes(b'{"name": "caf\xe9"}')
    _one_line(*_call(["serve-sim", "--profile", str(prof), "--port", "1"]), str(prof),
              "UTF-8")


@pytest.mark.parametrize("stored", [b'slo = ["x"\n', b"duration = 1\n\xff\n"])
def test_a_bad_stored_experiment_file_does_not_block_the_report(
        tmp_path: Path, stored: bytes) -> None:
    run = make_run(tmp_path / "run", [rec(i) for i in range(4)])
    (run / "experiment.toml").write_bytes(stored)
    code, err = _call(["report", str(run), "--no-charts"])
    assert code in (0, 3) and "Traceback" not in err, err
    notes = [ln for ln in err.splitlines() if "experiment.toml" in ln]
    assert len(notes) == 1 and "--config" not in notes[0], err


def test_a_label_with_any_character_round_trips_through_save_config(tmp_path: Path) -> None:
    wl = make_workload(tmp_path / "wl.jsonl", sessions=1, turns=1)
    saved = tmp_path / "exp.toml"
    code, err = _call(["compare", "--arm", f"a\x7fb\x01={_DEAD}", "--arm", f"c={_DEAD}",
                       "--workload", str(wl), "--duration", "1", "--out", str(tmp_path / "o"),
                       "--save-config", str(saved)])
    assert code == 0, err
    from replay.ab import load_experiment

    assert load_experiment(saved)["arm"][0] == f"a\x7fb\x01={_DEAD}"
