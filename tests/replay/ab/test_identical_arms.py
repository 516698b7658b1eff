"""An A/A run is named: arms that do not differ at all are refused by compare unless
--allow-identical, and then the summary and report say A/A and show the noise floor."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from analysis import RunManifest, judge_fairness
from replay.cli import main
from tests.analysis.builders import config, manifest
from tests.replay.ab.conftest import exit_for, sims


def _m(label: str, backend: str, target: str) -> RunManifest:
    return RunManifest.model_validate(manifest(
        run_id=f"{label}-u1", label=label, target=target,
        server_info={"vllm_config": config(backend)}))


def test_same_backend_on_two_servers_is_identical_and_a_backend_change_is_not() -> None:
    same = judge_fairness([_m("a", "auto", "http://127.0.0.1:1"),
                           _m("b", "auto", "http://127.0.0.1:2")])
    assert same.fair and same.identical and same.differences == []
    assert same.sentence.startswith("A/A run") and "only the decode backend" not in same.sentence
    ab = judge_fairness([_m("a", "auto", "http://127.0.0.1:1"),
                         _m("b", "latency_specialized", "http://127.0.0.1:1")])
    assert ab.fair and not ab.identical  # one port relaunched with another backend: an A/B
    one_arm = judge_fairness([_m("a", "auto", "http://127.0.0.1:1"),
                              _m("a", "auto", "http://127.0.0.1:1")])
    assert not one_arm.identical  # repeats of one arm are no A/A


@pytest.mark.sim
def test_both_arms_on_one_server_exit_2_then_allowed_as_a_noise_floor(
        tiny_workload: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cmp"
    with sims(("small", "auto")) as (url,):
        args = ["compare", "--arm", f"a={url}", "--arm", f"b={url}",
                "--workload", str(tiny_workload), "--users", "1", "--duration", "1",
                "--warmup", "0.2", "--drain", "0.5", "--out", str(out), "--quiet"]
        code = main(args)
        err = capsys.readouterr().err.strip()
        assert code == 2
        assert len(err.splitlines()) == 1 and "one server" in err and "--allow-identical" in err
        assert not (out / "runs").exists()  # refused before any load
        code = main([*args, "--allow-identical"])
    assert code == exit_for(out)
    printed = capsys.readouterr().out
    assert "A/A" in printed
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["fairness"]["identical"] is True
    assert summary["verdict"].startswith("A/A RUN") and "Noise floor" in summary["verdict"]
    html = (out / "report.html").read_text()
    assert "A/A" in html and "Noise floor" in html
