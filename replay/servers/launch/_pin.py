"""Pinning a launched server and the client to separate CPUs.

On a small CPU machine a vLLM CPU server (API server, engine core, worker with
its OpenMP threads) left to float shares cores with the client, whose event loop
then waits for a CPU while idle: it sends late and the run is stamped invalid
for schedule lag (``replay.load``'s stall watchdog names such stalls
``starved``). A server spec with ``cpus`` is confined to them: the process is
pinned as soon as it exists (its children and threads inherit that), its
OpenMP threads are bound inside the set (``VLLM_CPU_OMP_THREADS_BIND``, unless
the caller chose one), and once it is healthy any of its tasks found outside
the set is pinned again. :func:`pin_client` confines this process.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from replay.errors import ConfigError

__all__ = ["OMP_BIND", "cpu_list", "parse_cpus", "pin_client", "pin_group"]

OMP_BIND = "VLLM_CPU_OMP_THREADS_BIND"


def _available() -> set[int]:
    return set(os.sched_getaffinity(0))


def parse_cpus(text: str, flag: str) -> tuple[int, ...]:
    """``"1"``, ``"0-3"``, ``"0,2-3"`` as sorted CPU ids this process may use; else one
    line naming ``flag`` (exit 2)."""
    cpus: set[int] = set()
    for part in text.split(","):
        lo, dash, hi = part.strip().partition("-")
        try:
            first, last = int(lo), int(hi if dash else lo)
        except ValueError:
            raise ConfigError(f"{flag} {text!r}: give CPU ids like 1 or 0-3 or 0,2-3") \
                from None
        if first < 0 or last < first:
            raise ConfigError(f"{flag} {text!r}: {part.strip()!r} is not a CPU range")
        cpus.update(range(first, last + 1))
    missing = sorted(cpus - _available())
    if missing:
        raise ConfigError(f"{flag} {text!r}: CPU {missing[0]} is not one this process may use "
                          f"({cpu_list(_available())})")
    return tuple(sorted(cpus))


def cpu_list(cpus: Iterable[int]) -> str:
    """CPU ids as a comma list (the form ``VLLM_CPU_OMP_THREADS_BIND`` and taskset read)."""
    return ",".join(str(c) for c in sorted(cpus))


def pin_client(cpus: tuple[int, ...]) -> None:
    """Confine this process (threads started later inherit it) to ``cpus``."""
    os.sched_setaffinity(0, cpus)


def _tasks(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return [pid]


def pin_group(pids: Iterable[int], cpus: tuple[int, ...]) -> int:
    """Pin every thread of ``pids`` whose affinity strays outside ``cpus`` (threads
    already bound inside the set, e.g. OpenMP's one per core, keep their binding).
    Returns how many were moved; a thread gone meanwhile is skipped."""
    allowed, moved = set(cpus), 0
    for pid in pids:
        for tid in _tasks(pid):
            try:
                if not set(os.sched_getaffinity(tid)) <= allowed:
                    os.sched_setaffinity(tid, cpus)
                    moved += 1
            except OSError:
                continue
    return moved
