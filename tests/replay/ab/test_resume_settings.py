"""The resume check is derived from ``CompareOptions``: every knob that changes a run
refuses a resume when it changes, the ones that change no run do not, and a state
stored before a knob existed (the knob at its default) still resumes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replay.ab import CompareOptions
from replay.ab._driver import _settings
from replay.ab._state import check_resume
from replay.errors import ConfigError
from traces import generate, write_workload

_BASE = CompareOptions(duration_s=5)


@pytest.fixture()
def workload(tmp_path: Path) -> str:
    header, sessions = generate("coding-agent", sessions=2, seed=0, block_size=16,
                                max_context=4096)
    path = tmp_path / "wl.jsonl"
    write_workload(path, header, sessions)
    return str(path)


def _stored(out: Path, workload: str, opts: CompareOptions) -> None:
    out.mkdir()
    state = {"settings": _settings(["a", "b"], workload, opts), "runs": {"a-u1-r1": {}}}
    (out / "comparison.json").write_text(json.dumps(state))


@pytest.mark.parametrize("change", [
    {"itl_timeout_s": 30.0}, {"first_token_timeout_s": 30.0}, {"metrics_interval_s": 5.0},
    {"scenario": "agentx"}, {"duration_s": 6.0}, {"think_scale": 0.5},
])
def test_a_changed_run_knob_refuses_the_resume(
    tmp_path: Path, workload: str, change: dict[str, object],
) -> None:
    _stored(tmp_path / "cmp", workload, _BASE)
    changed = _BASE.model_copy(update=change)
    with pytest.raises(ConfigError, match="cannot resume") as err:
        check_resume(tmp_path / "cmp", _settings(["a", "b"], workload, changed))
    (key,) = change
    assert key in str(err.value)


def test_knobs_that_change_no_run_resume(tmp_path: Path, workload: str) -> None:
    _stored(tmp_path / "cmp", workload, _BASE)
    judged = _BASE.model_copy(update={"max_failure_share": 0.2, "allow_unfair": True,
                                      "api_key_env": "OTHER_KEY"})
    assert check_resume(tmp_path / "cmp", _settings(["a", "b"], workload, judged))["runs"]


def test_a_state_from_before_the_newer_knobs_still_resumes(workload: str) -> None:
    """Knobs at their default are not stored, so older states (without them) match."""
    stored = _settings(["a", "b"], workload, _BASE)
    assert not {"itl_timeout_s", "first_token_timeout_s", "metrics_interval_s",
                "scenario", "time_scale", "routing"} & set(stored)
    assert {"duration_s", "levels", "think_scale", "seed"} <= set(stored)
