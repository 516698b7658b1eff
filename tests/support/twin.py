"""A twin file and the ``plan --twin`` command line for the twin plan tests; the flat
small profile and small coding-agent workload the search and window-stop tests share."""

from __future__ import annotations

import json
from pathlib import Path

from replay.servers.sim import SimProfile, load_profile
from traces import generate, write_workload


def twin_file(tmp_path: Path, **changes: object) -> Path:
    data = json.loads(load_profile("small").model_dump_json())
    data["calibration"] = {"method": "test", "runs": 3}  # unknown to profiles: ignored
    data.update(changes)
    path = tmp_path / "twin.json"
    path.write_text(json.dumps(data))
    return path


def plan_argv(*extra: str) -> list[str]:
    return ["plan", "--duration", "30", "--warmup", "5", "--drain", "5", "--jobs", "1",
            *extra]


def flat_profile(slope: float = 0.12) -> SimProfile:
    """The ``small`` profile with both backends' steps 10 ms at batch 1, ``slope`` more at
    batch 64: one capacity line, known, for either backend."""
    timing = {"step_s_batch1": 0.01, "step_s_batch64": 0.01 + slope}
    data = load_profile("small").model_dump(mode="json")
    data.update(backends={"auto": timing, "latency_specialized": timing})
    return SimProfile.model_validate(data)


def small_agent_workload(path: Path) -> Path:
    """24 coding-agent sessions, scaled down (4K context, short thinks and answers)."""
    header, sessions = generate("coding-agent", sessions=24, seed=3, block_size=16,
                                max_context=4096, prompt_scale=0.05, think_scale=0.002,
                                output_scale=0.1)
    write_workload(path, header, sessions)
    return path
