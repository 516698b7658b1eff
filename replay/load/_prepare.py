"""A run's workload as it will be replayed: read, checked and retimed before any load.

:func:`prepare_run` is the first step of every run, real or modelled (the twin's
levels go through it too): the workload read once (or handed over already read, as a
:class:`Workload`: the twin replays one at every level), its arrival mode, the time
controls checked and applied, the drain decided, and the caveats known before the
first request (a window no arrival of a timestamp workload reaches).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from analysis import ValidityReason
from replay.errors import ConfigError
from replay.load._drain import resolve_drain
from replay.load._phases import Arrival
from replay.load._scenario import pinned_entries
from replay.load._settings import RunSettings
from replay.load._timeline import check_time_controls, empty_window_note, retimed
from traces import Session, WorkloadHeader, iter_sessions, read_header

__all__ = ["Prepared", "Workload", "load_workload", "prepare_run"]


@dataclass(frozen=True)
class Workload:
    """A workload file, read once (its header and sessions as written)."""

    path: str
    header: WorkloadHeader
    sessions: tuple[Session, ...]


def load_workload(path: str | os.PathLike[str]) -> Workload:
    """Read a workload file."""
    p = str(path)
    header = read_header(p)
    return Workload(path=p, header=header, sessions=tuple(iter_sessions(p)))


@dataclass(frozen=True)
class Prepared:
    """What a run replays, decided before the server is asked anything."""

    settings: RunSettings
    """The run's settings with the drain decided."""
    path: str
    header: WorkloadHeader
    sessions: list[Session]
    """The sessions as replayed (time controls applied)."""
    arrival: Arrival
    drain_note: str | None
    """How the drain was decided (None when ``--drain`` was given)."""
    caveats: list[ValidityReason]


def prepare_run(settings: RunSettings,
                workload: Workload | str | os.PathLike[str]) -> Prepared:
    """Read (unless already read) and check the workload, and apply the time controls."""
    if not isinstance(workload, Workload):
        workload = load_workload(workload)
    path, header = workload.path, workload.header
    sessions = list(workload.sessions)
    if not sessions:
        raise ConfigError(f"{path}: the workload holds no session")
    arrival: Arrival = "open" if settings.rate is not None else header.arrival
    if settings.split and arrival != "closed":
        raise ConfigError(f"{path}: --workers/--ray split closed-loop users; this "
                          f"workload's arrival mode is {arrival!r}")
    check_time_controls(settings, header.arrival, path, rated=settings.rate is not None)
    if settings.entries:  # a session or turn the workload lacks fails here, in one line
        if arrival != "closed":
            raise ConfigError(f"--entry pins closed-loop users; {path}'s arrival mode is "
                              f"{arrival!r}")
        if len(settings.entries) > settings.users:
            raise ConfigError(f"--entry given {len(settings.entries)} times for "
                              f"{settings.users} user(s): one per user at most")
        pinned_entries(settings.entries, sessions)
    sessions = retimed(settings, sessions, path)
    settings, drain_note = resolve_drain(settings, sessions)
    caveats = _time_caveats(settings, sessions, arrival)
    return Prepared(settings=settings, path=path, header=header, sessions=sessions,
                    arrival=arrival, drain_note=drain_note, caveats=caveats)


def _time_caveats(settings: RunSettings, sessions: Sequence[Session],
                  arrival: Arrival) -> list[ValidityReason]:
    """A window that would see no arrival of a timestamp workload, said on stderr
    before the run starts (and kept as a caveat of its validity)."""
    if arrival == "closed" or settings.rate is not None:
        return []
    note = empty_window_note(settings, sessions, settings.warmup_s, settings.duration_s)
    if note is None:
        return []
    print(f"warning: {note.message}", file=sys.stderr, flush=True)
    return [note]
