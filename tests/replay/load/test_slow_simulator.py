"""The starved-simulator trap end to end: a server whose engine steps really take 1.5x
what its profile says (``serve-sim --slowdown 1.5``, late by construction, whatever this
machine's speed) must give a run stamped invalid for speed, never a verdict.

The control run against an on-time server is not asserted valid: on a busy machine it
may be late too (that is the check working); it is asserted to measure less lateness.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis import RunManifest, measure, read_run, summarize
from replay.cli import main
from replay.servers.sim import SimServerProcess
from tests.support.workloads import make_workload

pytestmark = pytest.mark.sim


def _run(tmp_path: Path, url: str, name: str) -> tuple[int, RunManifest, float | None]:
    wl = make_workload(tmp_path / "wl.jsonl", sessions=4, turns=6, output=20, think_s=0.05)
    out = tmp_path / name
    code = main(["run", "--target", url, "--workload", str(wl), "--users", "2",
                 "--warmup", "0.5", "--duration", "3", "--drain", "5", "--out", str(out),
                 "--quiet", "--metrics-interval", "0.5"])
    manifest = RunManifest.model_validate_json((out / "run.json").read_bytes())
    lateness = summarize(measure(read_run(out)), bootstrap=False, tiers=()).sim_lateness
    return code, manifest, lateness


def test_a_slowed_simulator_is_stamped_invalid_for_speed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    with SimServerProcess("small", slowdown=1.5) as slow:
        code, manifest, lateness = _run(tmp_path, slow.url, "slow")
    err = capsys.readouterr().err
    assert lateness is not None and lateness >= 0.3  # 50% by construction, measured
    assert code == 3
    assert manifest.validity is not None and manifest.validity.verdict == "invalid"
    assert "sim_late" in {r.code for r in manifest.validity.reasons}
    assert "late" in err
    with SimServerProcess("small") as on_time:
        _, _, control = _run(tmp_path, on_time.url, "on-time")
    assert control is not None and control < lateness
