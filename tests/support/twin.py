"""A twin file and the ``plan --twin`` command line for the twin plan tests."""

from __future__ import annotations

import json
from pathlib import Path

from replay.servers.sim import load_profile


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
