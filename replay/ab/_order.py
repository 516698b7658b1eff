"""The order of an A/B comparison's runs, and which of them are already done.

Arms alternate A B B A across concurrency levels and repeats, so a slow drift
of the machine (thermal, background load, cache warmth) does not land on one
arm. Each run has a stable directory name, so an interrupted comparison can be
resumed by skipping the runs whose manifest says they completed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

__all__ = ["PlannedRun", "is_run_complete", "plan_runs", "plan_runs_by_arm"]


@dataclass(frozen=True)
class PlannedRun:
    arm: str
    users: int
    repeat: int

    @property
    def name(self) -> str:
        """Directory name of the run inside the comparison's ``runs/``."""
        return f"{_safe(self.arm)}-u{self.users}-r{self.repeat}"


def _safe(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in label)


def plan_runs(arms: Sequence[str], levels: Sequence[int], repeats: int) -> list[PlannedRun]:
    """Interleave arms A B B A ...: block k runs the arms forward when k is even."""
    if not arms or not levels or repeats < 1:
        raise ValueError("a comparison needs at least one arm, one level and one repeat")
    plan: list[PlannedRun] = []
    block = 0
    for repeat in range(repeats):
        for users in levels:
            order = list(arms) if block % 2 == 0 else list(reversed(arms))
            plan.extend(PlannedRun(arm, users, repeat) for arm in order)
            block += 1
    return plan


def plan_runs_by_arm(
    arms: Sequence[str], levels: Sequence[int], repeats: int
) -> list[tuple[str, list[PlannedRun]]]:
    """Group runs by arm for servers launched one at a time on the same GPUs.

    Restarting a server for every run would cost a model load each time, so
    launched arms alternate at server granularity instead: A B in even repeats,
    B A in odd ones, each arm running all its levels while it is up.
    """
    groups: list[tuple[str, list[PlannedRun]]] = []
    for repeat in range(repeats):
        order = list(arms) if repeat % 2 == 0 else list(reversed(arms))
        for arm in order:
            groups.append((arm, [PlannedRun(arm, users, repeat) for users in levels]))
    return groups


def is_run_complete(run_dir: Path) -> bool:
    """A run counts as done when its manifest says it completed uninterrupted."""
    manifest = run_dir / "run.json"
    try:
        data = orjson.loads(manifest.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    return bool(data.get("complete")) and not bool(data.get("interrupted"))
