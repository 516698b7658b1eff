"""Load levels: what set a run's load (users, a session rate, a time scale).

Closed-loop runs are grouped by users, open-loop runs by their session rate and
timestamp replays by their time scale, and each is labelled for what it is:
an open-loop level is never called "users".
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from analysis.schema._schema import LoadKind, RunManifest

__all__ = ["LoadLevel", "level_of"]


class LoadLevel(BaseModel):
    """One level of a sweep; orders by (kind, value)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: LoadKind = "users"
    value: float
    """Users, sessions per second, or the time scale."""

    @property
    def label(self) -> str:
        if self.kind == "users":
            n = int(self.value)
            return f"{n} user" if n == 1 else f"{n} users"
        if self.kind == "rate":
            return f"{self.value:g} sessions/s"
        return f"timestamps x{self.value:g}"

    @property
    def unit(self) -> str:
        return {"users": "users", "rate": "sessions/s", "timestamps": "time scale"}[self.kind]

    def key(self) -> tuple[str, float]:
        return (self.kind, self.value)


def level_of(m: RunManifest) -> LoadLevel:
    """The level of a run, from its manifest (``load_kind``, else ``load.arrival``)."""
    kind: LoadKind = m.load_kind
    if kind == "users" and m.load.arrival != "closed":
        kind = "rate" if m.load.arrival == "open" else "timestamps"
    if kind == "rate":
        return LoadLevel(kind=kind, value=float(m.load.rate or 0.0))
    if kind == "timestamps":
        return LoadLevel(kind=kind, value=float(m.load.time_scale or 1.0))
    return LoadLevel(kind="users", value=float(m.load.users or 0))
