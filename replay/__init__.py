"""Everything that touches a server or a clock: client, lanes, runs, probes, CLI."""

from replay._version import __version__
from replay.client._bodies import BodySpec, PrefixCacheModel, build_body
from replay.client._poller import MetricsPoller, parse_prometheus
from replay.client._probe import ServerFacts, probe_server
from replay.client._sse import SSEError, SSEEvent, SSEParser
from replay.client._stream import StreamOutcome, Timeouts, make_session, stream_request
from replay.errors import ConfigError, TargetError, UserError
from replay.load._live import LiveStats, LiveView
from replay.load._phases import run_load, run_load_sync
from replay.load._settings import RunConfig

__all__ = [
    "BodySpec",
    "ConfigError",
    "LiveStats",
    "LiveView",
    "MetricsPoller",
    "PrefixCacheModel",
    "RunConfig",
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
