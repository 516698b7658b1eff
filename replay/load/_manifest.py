"""A run's manifest as written at its start, and the check that its workload fits.

One way for every run: a real server's (``run_load``: the facts its probe found) and
the twin's (its profile's facts, with ``target`` naming the in-process engines).
"""

from __future__ import annotations

import os
import platform
import socket
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime

from analysis import RunManifest, public_url
from analysis.schema import ClockInfo, HostInfo, LoadKind, WorkloadRef
from replay._version import __version__
from replay.client import ServerFacts
from replay.errors import TargetError
from replay.load._phases import Arrival, first_too_long
from replay.load._scenario import ALIAS_NOTE as SCENARIO_ALIAS_NOTE
from replay.load._scenario import ALIASES as SCENARIO_ALIASES
from replay.load._settings import RunSettings
from replay.load._writer import iso_utc
from traces import Session, WorkloadHeader

__all__ = ["check_fits", "load_kind", "new_manifest"]


def new_manifest(settings: RunSettings, run_id: str, facts: ServerFacts, header: WorkloadHeader,
                 path: str, sessions: int, arrival: Arrival, *, target: str) -> RunManifest:
    """The manifest as written at the start (its clock is set at the origin);
    ``target`` is the served target as shown (a URL without credentials)."""
    now = iso_utc(datetime.now(UTC))
    manifest = RunManifest(
        run_id=run_id, label=settings.label, target=target,
        model=facts.model, api=settings.api, server_info=facts.server_info,
        server_models=facts.models, gpu_count=facts.gpu_count, simulated=facts.simulated,
        workload=WorkloadRef(path=path, fingerprint=header.fingerprint, source=header.source,
                             seed=header.seed, sessions=sessions,
                             block_size=header.block_size),
        load=settings.load_settings(arrival),
        clock=ClockInfo(t0_wall=now, t0_monotonic_ns=time.monotonic_ns()),
        started_at=now, tool_version=__version__,
        host=HostInfo(hostname=socket.gethostname(), platform=platform.platform(),
                      python=sys.version.split()[0], cpu_count=os.cpu_count()),
        vocab_size=facts.vocab_size, server_block_size=facts.block_size,
    )
    manifest.load_kind = load_kind(settings, arrival)
    manifest.scenario = settings.scenario
    manifest.session_headers = list(settings.session_headers)
    manifest.gpu_metrics = [public_url(u) for u in settings.gpu_urls(settings.label)]
    if settings.scenario in SCENARIO_ALIASES:
        manifest.warnings.append(SCENARIO_ALIAS_NOTE)
    if settings.split:
        manifest.workers = settings.workers
    if facts.max_model_len is None:
        manifest.warnings.append("server did not report max_model_len; prompts unchecked")
    return manifest


def load_kind(settings: RunSettings, arrival: Arrival) -> LoadKind:
    """What sets a run's load: users (closed loop), a session rate (``--rate``), or the
    workload's own times (timestamp replay, or open-loop sessions at their arrivals)."""
    if settings.rate is not None:
        return "rate"
    return "users" if arrival == "closed" else "timestamps"


def check_fits(sessions: Sequence[Session], path: str, facts: ServerFacts, shown: str) -> None:
    """Refuse, in one line, a workload with a request longer than the server's (or the
    twin's) ``max_model_len`` (``shown``: the server as the line names it)."""
    limit = facts.max_model_len
    if limit is None:
        return
    found = first_too_long(sessions, limit)
    if found is not None:
        sess, turn, req = found
        need = req.prompt_tokens + req.output_tokens
        raise TargetError(
            f"{path}: session {sess.id!r} request {turn} needs {need} tokens "
            f"({req.prompt_tokens} prompt + {req.output_tokens} output) but {shown} "
            f"serves {facts.model!r} with max_model_len {limit}; make one that fits "
            f"with `agentreplay traces generate --max-context {limit}` (or `traces "
            f"import --max-context {limit}` for a real trace): token sizes are "
            "scaled, the sessions' shape kept")
