"""Everything that touches a server or a clock: client, lanes, runs, probes, CLI.

The public names load on first use (PEP 562): ``import replay`` itself imports
nothing, so the ``agentreplay`` command (``replay.cli``, a subpackage) reaches its
own first line in microseconds and can take over Ctrl-C before any slow import
(see ``replay/cli/_startup.py``).
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: ``typing`` is a slow import of its own
if TYPE_CHECKING:
    from replay._version import __version__
    from replay.client import (
        BodySpec,
        MetricsPoller,
        PrefixCacheModel,
        ServerFacts,
        SSEError,
        SSEEvent,
        SSEParser,
        StreamOutcome,
        Timeouts,
        build_body,
        make_session,
        parse_prometheus,
        probe_server,
        stream_request,
    )
    from replay.errors import ConfigError, TargetError, UserError
    from replay.load import LiveStats, LiveView, RunConfig, RunSettings, run_load, run_load_sync

__all__ = [
    "BodySpec",
    "ConfigError",
    "LiveStats",
    "LiveView",
    "MetricsPoller",
    "PrefixCacheModel",
    "RunConfig",
    "RunSettings",
    "SSEError",
    "SSEEvent",
    "SSEParser",
    "ServerFacts",
    "StreamOutcome",
    "TargetError",
    "Timeouts",
    "UserError",
    "__version__",
    "build_body",
    "make_session",
    "parse_prometheus",
    "probe_server",
    "run_load",
    "run_load_sync",
    "stream_request",
]

_HOME = {
    "__version__": "replay._version",
    "ConfigError": "replay.errors", "TargetError": "replay.errors", "UserError": "replay.errors",
    "LiveStats": "replay.load", "LiveView": "replay.load", "RunConfig": "replay.load",
    "RunSettings": "replay.load", "run_load": "replay.load", "run_load_sync": "replay.load",
}
"""Where each public name lives; the rest live in ``replay.client``."""


def __getattr__(name: str) -> object:
    import importlib

    if name not in __all__:
        raise AttributeError(f"module 'replay' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME.get(name, "replay.client")), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) - {"TYPE_CHECKING", "annotations"}
                  | set(__all__))
