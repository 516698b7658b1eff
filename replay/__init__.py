"""Everything that touches a server or a clock: client, lanes, runs, probes, CLI."""

from replay._client import StreamOutcome, Timeouts, make_session, stream_request
from replay._config import RunConfig
from replay._live import LiveStats, LiveView
from replay._metrics import MetricsPoller, parse_prometheus
from replay._probe import ServerFacts, probe_server
from replay._prompts import BodySpec, PrefixCacheModel, build_body
from replay._run import run_load, run_load_sync
from replay._sse import SSEError, SSEEvent, SSEParser
from replay._version import __version__
from replay.errors import ConfigError, TargetError, UserError

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
