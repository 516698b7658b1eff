"""``agentreplay calibrate`` on a real vLLM CPU server: runs at 1, 2, 4 and 8 users, a
twin fitted on 1, 2, 4, level 8 predicted on a loopback serve-sim and compared with
the measured run. The errors are printed whatever they are; the P90 interactivity
prediction must be within 15%. On a CPU shared with other work the runs themselves do
not repeat (docs/calibrate.md has the numbers): the test needs a quiet machine."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from replay.cli import main
from replay.launch._launcher import LaunchedArm
from traces import generate, write_workload

pytestmark = pytest.mark.vllm

LEVELS = (1, 2, 4, 8)


def _reset_cache(url: str) -> None:
    req = urllib.request.Request(url + "/reset_prefix_cache", data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=30):
        pass


def test_calibrate_predicts_a_held_out_level_of_a_real_server(
    vllm_server: LaunchedArm, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    wl = tmp_path / "wl.jsonl"
    header, sessions = generate("coding-agent", sessions=8, seed=3, block_size=16,
                                max_context=2048, prompt_scale=0.02, think_scale=0.01,
                                output_scale=0.2)
    write_workload(wl, header, sessions)
    runs = tmp_path / "runs"
    for users in LEVELS:
        _reset_cache(vllm_server.url)  # every level starts cold, as the twin's sim does
        code = main(["run", "--target", vllm_server.url, "--workload", str(wl), "--users",
                     str(users), "--warmup", "3", "--duration", "10", "--drain", "20",
                     "--out", str(runs / f"u{users}"), "--quiet", "--metrics-interval", "1"])
        assert code in (0, 3)
    twin = tmp_path / "twin.json"
    code = main(["calibrate", *(str(runs / f"u{u}") for u in LEVELS), "-o", str(twin),
                 "--holdout", "8", "--workload", str(wl)])
    out = capsys.readouterr().out
    assert code == 0, out
    cal = json.loads(twin.read_text())["calibration"]
    (hold,) = cal["holdouts"]
    with capsys.disabled():
        print("\n" + out)
        print(f"real vLLM, held out 8 users: predicted {hold['predicted']}, "
              f"measured {hold['measured']}, relative errors {hold['relative_error']}")
    assert abs(hold["relative_error"]["p90_interactivity"]) <= 0.15
