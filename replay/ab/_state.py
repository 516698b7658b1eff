"""``comparison.json``: the resumable state of a comparison (its settings, plan and
each run's status), the resume check against it, and what an interrupted one lacks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from analysis import public_url
from replay.ab._order import PlannedRun, is_run_complete
from replay.errors import ConfigError

__all__ = ["SEARCH_STATE_FILE", "STATE_FILE", "SearchState", "State", "check_resume",
           "missing_runs"]

STATE_FILE = "comparison.json"
SEARCH_STATE_FILE = "search-state.json"


def check_resume(out: Path, settings: dict[str, Any], name: str = STATE_FILE
                 ) -> dict[str, Any]:
    """The stored state of a previous attempt ({} if none, or in file ``name``: a
    search keeps its own); refuse other settings."""
    path = out / name
    if not path.exists():
        return {}
    try:
        old = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        raise ConfigError(f"{path}: unreadable; remove it or use another --out") from None
    if not isinstance(old, dict) or not isinstance(old.get("settings", {}), dict):
        _not_ours(path, "" if not isinstance(old, dict) else " field 'settings'")
    before = old.get("settings", {})
    diff = sorted(k for k in set(before) | set(settings) if before.get(k) != settings.get(k))
    if diff and not old.get("runs"):
        # No load was sent yet (the attempt failed while starting or probing): nothing
        # can be mixed, so the corrected command starts afresh instead of being refused.
        return {k: v for k, v in old.items() if k not in ("settings", "runs", "preflight")}
    if diff:
        shown = "; ".join(f"{k}: was {before.get(k)!r}, now {settings.get(k)!r}" for k in diff)
        raise ConfigError(f"{path}: cannot resume with different settings ({shown}); "
                          "rerun the original command or use another --out")
    return dict(old)


def _not_ours(path: Path, where: str) -> None:
    raise ConfigError(f"{path}:{where} not a JSON object (not a state this agentreplay "
                      "wrote); remove it or use another --out")


class State:
    """``comparison.json``: loaded on resume, rewritten after every run."""

    def __init__(self, out: Path, settings: dict[str, Any], plan: Sequence[PlannedRun],
                 arms: Mapping[str, str | None], mode: str) -> None:
        self.path = out / STATE_FILE
        self.data: dict[str, Any] = check_resume(out, settings)
        if not isinstance(self.data.get("runs", {}), dict):
            _not_ours(self.path, " field 'runs'")
        self.data.update(kind="agentreplay-comparison-state", settings=settings, mode=mode,
                         arms={k: None if v is None else public_url(v)
                               for k, v in arms.items()},
                         plan=[{"name": r.name, "arm": r.arm, "users": r.users,
                                "repeat": r.repeat} for r in plan])
        self.data.setdefault("runs", {})
        self.save()

    def record(self, run: PlannedRun, **fields: Any) -> None:
        entry = self.data["runs"].setdefault(run.name, {"dir": f"runs/{run.name}"})
        entry.update(fields)
        self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_bytes(orjson.dumps(self.data, option=orjson.OPT_INDENT_2))
        tmp.replace(self.path)


class _SearchStateFile(BaseModel):
    """What ``search-state.json`` must hold to be resumed from: a hand-edited or
    damaged one is refused before any load, naming the field."""

    model_config = ConfigDict(extra="allow", strict=True)
    settings: dict[str, Any] = {}
    runs: list[str] = []


class SearchState:
    """``search-state.json``: the servers (without credentials) and run settings the
    probes on disk were made with, and the probes run; another command into the same
    directory is refused before any load."""

    def __init__(self, out: Path, settings: dict[str, Any]) -> None:
        self.path = out / SEARCH_STATE_FILE
        data = check_resume(out, settings, SEARCH_STATE_FILE)
        try:
            _SearchStateFile.model_validate(data)
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(x) for x in err["loc"])
            raise ConfigError(f"{self.path}: field {where!r}: {err['msg']} (not a state this "
                              "agentreplay wrote); remove it or use another --out") from None
        self.data = data
        self.data.update(kind="agentreplay-search-state", settings=settings)
        self.data.setdefault("runs", [])
        self.save()

    def ran(self, name: str) -> None:
        if name not in self.data["runs"]:
            self.data["runs"].append(name)
        self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_bytes(orjson.dumps(self.data, option=orjson.OPT_INDENT_2))
        tmp.replace(self.path)


def missing_runs(out: Path) -> list[str]:
    """The planned runs of a comparison directory that did not finish, each as
    ``name (status)``: an interrupted comparison's report names them and claims nothing
    from them. Empty when ``comparison.json`` is absent or unreadable (runs given by
    hand have no plan)."""
    try:
        data = orjson.loads((out / STATE_FILE).read_bytes())
        plan, runs = data["plan"], data.get("runs", {})
        names = [str(p["name"]) for p in plan]
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        return []
    status = {k: v.get("status") for k, v in runs.items() if isinstance(v, dict)} \
        if isinstance(runs, dict) else {}
    return [f"{n} ({status.get(n) or 'not run'})" for n in names
            if status.get(n) != "complete" or not is_run_complete(out / "runs" / n)]
