"""Everything that touches a server or a clock: client, lanes, runs, probes, CLI."""

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
