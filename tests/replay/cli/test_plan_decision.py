"""``plan``: capacity per GPU printed as bounds, the twin's fleet size said beside the
measured server's, and the decision the report opens with printed last."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replay.cli import main
from replay.servers.sim import load_profile
from tests.analysis.report.builders import make_sweep
from tests.replay.conftest import make_workload


def test_plan_twin_per_gpu_and_the_decision(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    wl = make_workload(tmp_path / "wl.jsonl", sessions=6, turns=6, new_blocks=8, output=40,
                       think_s=2.0, shared_blocks=2)
    twin = tmp_path / "twin.json"
    # 1 GPU per replica; of the measured runs' model (plan refuses a twin of another)
    twin.write_text(load_profile("small").model_copy(update={"model": "tiny-llama"})
                    .model_dump_json())
    # measured: auto at ~104/77 tok/s/user at 1/4 users on 2 GPUs (make_sweep's config)
    # 40 requests per user, so a level can tell met from failed (not indeterminate)
    root = make_sweep(tmp_path / "m", arms={"auto": 0.008}, levels=(1, 4), per_user=40)
    code = main(["plan", "--twin", str(twin), "--workload", str(wl), "--users", "1:6",
                 "--levels", "3", "--duration", "30", "--warmup", "5", "--drain", "5",
                 "--jobs", "1", "--backend", "auto", "--slo", "10:5", "--slo", "90:5", str(root)])
    out = capsys.readouterr().out
    assert code == 0, out
    lines = out.splitlines()
    # the twin's capacity per GPU on its fleet (1 replica x 1 GPU), a bound as a bound
    assert "tier 10:5: per GPU \u2265 6.00 users per GPU (1 replica x 1 GPU) " \
        "[modelled (twin)]" in lines
    # the measured server's per GPU, and that it is not the twin's size
    assert ("tier 90:5: measured auto per GPU: 0.50 \u2013 2.00 users per GPU (measured; "
            "measured on 2 GPUs, the twin on 1: compare per GPU, not users)") in lines
    # last: the decision, measured first and the stored twin beside it, labelled modelled
    stored = json.loads((root / "twin-plan.json").read_text())
    assert stored["gpus_per_replica"] == 1
    decision = [x for x in lines if x.startswith(("[SIMULATED] Capacity at", "Capacity at"))]
    assert len(decision) == 2
    assert "auto between 1 and 4 users measured (0.50 \u2013 2.00 users per GPU)" in decision[1]
    assert "modelled: " in decision[0] and "1 replica x 1 GPU" in decision[0]
    assert decision[0].index(" measured ") < decision[0].index("modelled")
    assert lines[-1].startswith("Interactivity: ") or lines[-1].startswith("Measured: ")


@pytest.mark.parametrize("width", [80, 100])
def test_the_capacity_table_fits_a_narrow_terminal(tmp_path: Path, width: int) -> None:
    """Rows of (tier, arm) and a ratio row: every line within the terminal, the ratio
    printed whole (a column per arm cropped the ratio off the right edge)."""
    import io

    from rich.console import Console

    from analysis import capacity_view, compare_runs, read_runs
    from replay.cli._cmd_plan import capacity_table

    root = make_sweep(tmp_path / "m", arms={"auto": 0.008, "latency_specialized": 0.004},
                      levels=(1, 4), per_user=40)
    view = capacity_view(compare_runs(read_runs([root])))
    out = io.StringIO()
    Console(file=out, width=width, force_terminal=False).print(capacity_table(view))
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= width, text
    ratios = [r["value"] for row in view["rows"] for r in row["ratios"]]
    assert len(ratios) == len(view["rows"]) >= 2
    flat = " ".join(text.split())
    for value in ratios:  # whole, though perhaps wrapped over two lines of its cell
        words = value.split()
        assert all(w in flat for w in words), (value, text)
