"""Scenario judging is analysis' (pure): a run's verdict from its manifest, its records'
summary and its workload header's facts, with no file read. The same run judged from
memory and from its written directory gets the same verdict."""

from __future__ import annotations

from pathlib import Path

import orjson

from analysis import RunManifest, read_run
from analysis.judge import analyse_run, judge_run_scenario, stamp_scenario
from analysis.read import run_data
from tests.analysis.builders import make_run, manifest, rec

_LOAD = {"users": 2, "duration_s": 100, "warmup_s": 10, "drain_s": 5, "seed": 42,
         "think_time_cap_s": None}


def _records() -> list[dict[str, object]]:
    """Ten window requests: three failed, one ok without the server's token count."""
    out = [rec(i, status="error" if i < 3 else "ok", error_kind="http_500" if i < 3 else None,
               prompt_tokens_server=None if i == 5 else 100) for i in range(10)]
    return out


def test_the_verdict_reads_the_failure_share_and_the_uncounted_requests() -> None:
    m = RunManifest.model_validate(manifest(scenario="agentx-mvp", load=_LOAD))
    data = b"".join(orjson.dumps(r) + b"\n" for r in _records())
    run = run_data(m, data, [])
    s = analyse_run(run, bootstrap=False, assess=False)
    assert s.counts.failure_share == 0.3
    verdict = judge_run_scenario(m, run, s, header_params={}, max_context=None)
    assert verdict is not None and not verdict.satisfied
    assert "30.0% of the window's requests failed; scenario agentx-mvp allows 5%" \
        in verdict.notes
    assert any(n.startswith("1 completed request in the window came back without")
               for n in verdict.notes)
    assert "window 100 s is below the minimum (scenario agentx-mvp measures at least 900 s)" \
        in verdict.notes
    stamp_scenario(m, verdict)
    assert m.scenario_satisfied is False and m.scenario_notes == verdict.notes


def test_the_uncounted_note_agrees_with_its_count() -> None:
    """Two requests without usage read as a plural ('2 completed requests')."""
    m = RunManifest.model_validate(manifest(scenario="agentx-mvp", load=_LOAD))
    records = [rec(i, prompt_tokens_server=None if i in (5, 6) else 100) for i in range(10)]
    run = run_data(m, b"".join(orjson.dumps(r) + b"\n" for r in records), [])
    verdict = judge_run_scenario(m, run, analyse_run(run, bootstrap=False, assess=False),
                                 header_params={}, max_context=None)
    assert verdict is not None
    assert any(n.startswith("2 completed requests in the window came back without")
               for n in verdict.notes)


def test_unreadable_records_and_no_scenario() -> None:
    m = RunManifest.model_validate(manifest(scenario="agentx-mvp", load=_LOAD))
    verdict = judge_run_scenario(m, None, None)
    assert verdict is not None
    assert "no request was measured in the window (failure share unknown)" in verdict.notes
    plain = RunManifest.model_validate(manifest())
    assert judge_run_scenario(plain, None, None) is None


def test_in_memory_and_written_runs_are_judged_alike(tmp_path: Path) -> None:
    records = _records()
    root = make_run(tmp_path / "run", records, scenario="agentx-mvp", load=_LOAD)
    on_disk = read_run(root)
    m = RunManifest.model_validate(manifest(scenario="agentx-mvp", load=_LOAD))
    in_memory = run_data(m, b"".join(orjson.dumps(r) + b"\n" for r in records), [])
    verdicts = [judge_run_scenario(r.manifest, r, analyse_run(r, bootstrap=False))
                for r in (on_disk, in_memory)]
    assert verdicts[0] == verdicts[1]
    a = analyse_run(on_disk, bootstrap=False).model_dump(exclude={"runs"})
    b = analyse_run(in_memory, bootstrap=False).model_dump(exclude={"runs"})
    assert a == b


def test_the_system_idle_cap_is_judged_from_run_json() -> None:
    """A run without ``idle_cap`` (or with another cap) did not follow the rule that
    both AgentX presets set; one with the rules' 10 s cap gets no note for it."""
    records = [rec(i) for i in range(10)]
    notes = {}
    for name, cap in [("none", None), ("capped", 10.0), ("other", 30.0)]:
        idle = None if cap is None else {"cap_s": cap, "scope": "run", "counts_from": "origin",
                                         "shifts": 2, "shifted_s": 70.0}
        m = RunManifest.model_validate(manifest(scenario="agentx-mvp", load=_LOAD,
                                                idle_cap=idle))
        run = run_data(m, b"".join(orjson.dumps(r) + b"\n" for r in records), [])
        verdict = judge_run_scenario(m, run, analyse_run(run, bootstrap=False, assess=False))
        assert verdict is not None
        notes[name] = [n for n in verdict.notes if "idle time" in n]
    assert notes["capped"] == []
    assert notes["none"] == ["the run's idle time was not capped (scenario agentx-mvp pulls "
                             "every pending request forward once nothing has been in flight "
                             "for 10 s)"]
    assert notes["other"] == ["the run's idle time was capped at 30 s; scenario agentx-mvp "
                              "caps it at 10 s"]
