"""The order of an A/B comparison's runs, and which of them are already done.

Arms alternate A B B A across load levels (user counts, or session rates for
open-loop comparisons) and repeats, so a slow drift of the machine (thermal,
background load, cache warmth) does not land on one arm. Servers launched one
at a time keep that order too; consecutive runs of the same arm share one
server start (:func:`launch_groups`). Each run has a stable directory name, so an
interrupted comparison can be resumed by skipping the runs whose manifest says
they completed and were not stamped invalid (:func:`is_run_reusable`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from analysis import LoadLevel

__all__ = ["PlannedRun", "is_run_complete", "is_run_reusable", "launch_groups", "plan_runs",
           "run_verdict"]


@dataclass(frozen=True)
class PlannedRun:
    arm: str
    users: int
    repeat: int
    rate: float | None = None
    """Open-loop session arrivals per second; when set, it (not users) is the level."""

    @property
    def name(self) -> str:
        """Directory name of the run inside the comparison's ``runs/``."""
        if self.rate is not None:
            return f"{_safe(self.arm)}-rate{self.rate:g}-r{self.repeat}"
        return f"{_safe(self.arm)}-u{self.users}-r{self.repeat}"

    @property
    def load(self) -> LoadLevel:
        """The run's level as the analysis and the report name it (the rate when set)."""
        if self.rate is not None:
            return LoadLevel(kind="rate", value=self.rate)
        return LoadLevel(kind="users", value=self.users)

    @property
    def level(self) -> str:
        """The level in words: ``4 users`` or ``0.5 sessions/s``."""
        return self.load.label


def _safe(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in label)


def plan_runs(arms: Sequence[str], levels: Sequence[int], repeats: int, *,
              rates: Sequence[float] | None = None) -> list[PlannedRun]:
    """Interleave arms A B B A ...: block k runs the arms forward when k is even.
    With ``rates`` the levels are those session rates (``levels`` is ignored)."""
    steps: list[tuple[int, float | None]] = (
        [(0, r) for r in rates] if rates is not None else [(u, None) for u in levels])
    if not arms or not steps or repeats < 1:
        raise ValueError("a comparison needs at least one arm, one level and one repeat")
    plan: list[PlannedRun] = []
    block = 0
    for repeat in range(repeats):
        for users, rate in steps:
            order = list(arms) if block % 2 == 0 else list(reversed(arms))
            plan.extend(PlannedRun(arm, users, repeat, rate) for arm in order)
            block += 1
    return plan


def launch_groups(plan: Sequence[PlannedRun]) -> list[tuple[str, list[PlannedRun]]]:
    """Consecutive runs of the same arm, each group one server start when the arms'
    servers are launched one at a time (A | B B | A A | B ...: the plan's order kept)."""
    groups: list[tuple[str, list[PlannedRun]]] = []
    for run in plan:
        if groups and groups[-1][0] == run.arm:
            groups[-1][1].append(run)
        else:
            groups.append((run.arm, [run]))
    return groups


def _manifest(run_dir: Path) -> dict[str, object]:
    try:
        data = orjson.loads((run_dir / "run.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def is_run_complete(run_dir: Path) -> bool:
    """The run's manifest says it completed uninterrupted."""
    data = _manifest(run_dir)
    return bool(data.get("complete")) and not bool(data.get("interrupted"))


_RANK = {"valid": 0, "caveats": 1, "invalid": 2}


def run_verdict(run_dir: Path) -> str | None:
    """The run's validity verdict, assessed again from its records and manifest (an
    unreadable run is invalid; None without a run.json). The stamp in run.json can
    only make it worse (caveats the replay knew before it started), never better: a
    hand-edited ``valid`` does not get an invalid run reused."""
    from analysis import ResultError, assess_run, read_run

    if not (run_dir / "run.json").is_file():
        return None
    try:
        found: str = assess_run(read_run(run_dir)).verdict
    except ResultError:
        return "invalid"
    validity = _manifest(run_dir).get("validity")
    stamped = validity.get("verdict") if isinstance(validity, dict) else None
    if isinstance(stamped, str) and _RANK.get(stamped, 0) > _RANK.get(found, 0):
        return stamped
    return found


def is_run_reusable(run_dir: Path) -> bool:
    """A resumed comparison keeps a run when it completed and was not stamped invalid
    (a server that died, an empty window: those runs are redone)."""
    return is_run_complete(run_dir) and run_verdict(run_dir) != "invalid"
