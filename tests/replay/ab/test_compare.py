"""compare against simulated servers: order, outputs, fairness refusal and override."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from replay.ab import CompareOptions, compare_arms, is_run_complete, plan_runs
from replay.cli import main
from replay.errors import ConfigError
from tests.support.servers import exit_for, profile_variant, sims


def _opts(**kw: object) -> CompareOptions:
    base: dict[str, object] = dict(levels=(1, 2), duration_s=1.0, warmup_s=0.2, drain_s=0.5,
                                   metrics_interval_s=None)
    base.update(kw)
    return CompareOptions(**base)  # type: ignore[arg-type]


def _started(run_dir: Path) -> str:
    return orjson.loads((run_dir / "run.json").read_bytes())["started_at"]


@pytest.fixture(scope="module")
def abba(uses_sim: None, tiny_workload: Path,
         tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str,
                                                                                  str]:
    out = tmp_path_factory.mktemp("abba") / "cmp"
    with sims(("small", "auto"), ("small", "latency_specialized")) as urls:
        result = compare_arms([("auto", urls[0]), ("latency_specialized", urls[1])],
                              tiny_workload, out, _opts())
    return out, result.verdict, result.fairness_sentence


def test_compare_runs_abba_and_writes_report(abba: tuple[Path, str, str]) -> None:
    out, verdict, fairness = abba
    plan = plan_runs(["auto", "latency_specialized"], [1, 2], 1)
    names = [r.name for r in plan]
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(names)
    assert all(is_run_complete(out / "runs" / n) for n in names)
    # started in plan order: A B B A
    starts = [_started(out / "runs" / n) for n in names]
    assert starts == sorted(starts)
    assert [n.split("-u")[0] for n in names] == ["auto", "latency_specialized",
                                                 "latency_specialized", "auto"]
    state = orjson.loads((out / "comparison.json").read_bytes())
    assert [p["name"] for p in state["plan"]] == names
    assert {k: v["status"] for k, v in state["runs"].items()} == dict.fromkeys(names, "complete")
    assert all(v["prefix_cache_reset"] for v in state["runs"].values())
    assert state["preflight"]["fair"] is True
    for f in ("report.html", "summary.json", "requests.csv"):
        assert (out / f).stat().st_size > 0
    assert "latency_specialized" in verdict
    assert fairness.startswith("Fair comparison")


@pytest.mark.sim
def test_unfair_arms_are_refused_before_any_load(tiny_workload: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    variant = profile_variant(tmp_path, max_num_seqs=32)
    out = tmp_path / "cmp"
    with sims(("small", "auto"), (str(variant), "latency_specialized")) as urls:
        args = ["compare", "--arm", f"auto={urls[0]}", "--arm",
                f"latency_specialized={urls[1]}", "--workload", str(tiny_workload),
                "--users", "1", "--duration", "1", "--out", str(out), "--quiet"]
        code = main(args)
        err = capsys.readouterr().err
        assert code == 2
        assert "max_num_seqs" in err
        assert not (out / "runs").exists()
        code = main([*args, "--allow-unfair", "--warmup", "0.2", "--drain", "0.5"])
    assert code == exit_for(out)
    printed = capsys.readouterr().out
    assert "UNFAIR" in printed
    html = (out / "report.html").read_text()
    assert "UNFAIR" in html
    assert "max_num_seqs" in html
    state = orjson.loads((out / "comparison.json").read_bytes())
    assert state["preflight"]["overridden"] is True


def test_resume_with_other_settings_is_refused(abba: tuple[Path, str, str],
                                               tiny_workload: Path, tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    shutil.copytree(abba[0], out)
    dead = [("auto", "http://127.0.0.1:9"), ("latency_specialized", "http://127.0.0.1:9")]
    with pytest.raises(ConfigError, match=r"duration_s: was 1\.0, now 2\.0"):
        compare_arms(dead, tiny_workload, out, _opts(duration_s=2.0))
    with pytest.raises(ConfigError, match="levels"):
        compare_arms(dead, tiny_workload, out, _opts(levels=(1, 2, 4)))
