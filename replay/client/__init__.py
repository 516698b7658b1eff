"""One request: HTTP session and connector, request bodies, SSE parsing, server probes.

Other packages import these names from ``replay.client``, never its private modules.
"""

from replay.client._bodies import (
    BodySpec,
    CacheMark,
    ChainEncoder,
    Hashed,
    PrefixCacheModel,
    build_body,
    chat_text,
    ids_text,
    prefix_keys,
)
from replay.client._chat import ChatCodec, fetch_chat_codec
from replay.client._connector import StreamingConnector
from replay.client._gpu import gpu_metrics_url, parse_dcgm
from replay.client._poller import DEFAULT_MAX_METRICS_BYTES, MetricsPoller, parse_prometheus
from replay.client._probe import (
    ServerFacts,
    base_url,
    connect_url,
    find_key,
    probe_server,
    public_target,
    search_vocab_size,
)
from replay.client._sse import DEFAULT_MAX_LINE_BYTES, SSEError, SSEEvent, SSEParser
from replay.client._stream import StreamOutcome, Timeouts, make_session, stream_request

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "DEFAULT_MAX_METRICS_BYTES",
    "BodySpec",
    "CacheMark",
    "ChainEncoder",
    "ChatCodec",
    "Hashed",
    "MetricsPoller",
    "PrefixCacheModel",
    "SSEError",
    "SSEEvent",
    "SSEParser",
    "ServerFacts",
    "StreamOutcome",
    "StreamingConnector",
    "Timeouts",
    "base_url",
    "build_body",
    "chat_text",
    "connect_url",
    "fetch_chat_codec",
    "find_key",
    "gpu_metrics_url",
    "ids_text",
    "make_session",
    "parse_dcgm",
    "parse_prometheus",
    "prefix_keys",
    "probe_server",
    "public_target",
    "search_vocab_size",
    "stream_request",
]
