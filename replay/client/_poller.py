"""Polling the server's ``/metrics`` into ``server_metrics.jsonl``.

The Prometheus text is parsed here, cheaply: keep ``vllm:`` samples (and the
simulator's ``vllm_sim:`` ones, e.g. the engine-step lateness counters the
validity checks read), drop histogram buckets and ``_created`` stamps, and sum
each name over its labels (engines, models), so a histogram becomes its
``_sum`` and ``_count``. A compressed answer (sent although the session asks
for ``identity``) is a failed scrape, not parsed garbage.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

import aiohttp

__all__ = ["DEFAULT_MAX_METRICS_BYTES", "METRIC_PREFIXES", "MetricsPoller", "parse_prometheus"]

DEFAULT_MAX_METRICS_BYTES = 64 * 1024 * 1024
METRIC_PREFIXES = ("vllm:", "vllm_sim:")
"""Sample names kept from ``/metrics``: vLLM's own and the simulator's."""


def parse_prometheus(text: str,
                     prefix: str | tuple[str, ...] = METRIC_PREFIXES) -> dict[str, float]:
    """Sum every sample whose name starts with ``prefix`` (one or several) over its
    labels; buckets and ``_created`` skipped."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(prefix):
            continue
        brace = line.find("{")
        if brace >= 0:
            name = line[:brace]
            close = line.rfind("}")
            rest = line[close + 1 :].split()
        else:
            parts = line.split()
            if not parts:
                continue
            name, rest = parts[0], parts[1:]
        if not rest or name.endswith(("_bucket", "_created")):
            continue
        try:
            value = float(rest[0])
        except ValueError:
            continue
        if math.isnan(value):
            continue
        values[name] = values.get(name, 0.0) + value
    return values


class MetricsPoller:
    """Scrape ``/metrics`` every ``interval_s`` and hand each sample to ``sink``.

    A failed scrape is skipped (counted in ``failures``): the server being slow to
    answer its metrics must not stop the run.
    """

    def __init__(
        self, session: aiohttp.ClientSession, url: str, interval_s: float,
        sink: Callable[[float, dict[str, float]], None], t0_ns: int,
        headers: dict[str, str] | None = None, max_bytes: int = DEFAULT_MAX_METRICS_BYTES,
        parse: Callable[[str], dict[str, float]] = parse_prometheus,
    ) -> None:
        self._session = session
        self._url = url
        self.interval_s = interval_s
        self._sink = sink
        self._t0_ns = t0_ns
        self._headers = headers or {}
        self.max_bytes = max_bytes
        """A larger answer is skipped (a failure) after reading this much, not buffered."""
        self.failures = 0
        self.latest: dict[str, float] = {}
        self._parse = parse
        """Text to sample: vLLM's ``/metrics`` by default, or a DCGM exporter's
        (``replay.client._gpu.parse_dcgm``)."""

    async def scrape(self) -> dict[str, float] | None:
        """One scrape now; the sample is also passed to the sink."""
        try:
            timeout = aiohttp.ClientTimeout(total=max(self.interval_s, 5.0))
            async with self._session.get(self._url, headers=self._headers,
                                         timeout=timeout) as resp:
                encoding = resp.headers.get("Content-Encoding", "identity")
                if resp.status != 200 or encoding.strip().lower() != "identity":
                    self.failures += 1
                    return None
                raw = bytearray()
                while len(raw) <= self.max_bytes:  # read(n) returns what has arrived
                    more = await resp.content.read(self.max_bytes + 1 - len(raw))
                    if not more:
                        break
                    raw += more
        except (aiohttp.ClientError, TimeoutError, OSError):
            self.failures += 1
            return None
        if len(raw) > self.max_bytes:
            self.failures += 1
            return None
        text = raw.decode("utf-8", "replace")
        t_s = (time.monotonic_ns() - self._t0_ns) / 1e9
        values = self._parse(text)
        self.latest = values
        self._sink(t_s, values)
        return values

    async def run(self) -> None:
        """Scrape on a fixed grid of absolute times until cancelled."""
        loop = asyncio.get_running_loop()
        nxt = loop.time()
        while True:
            await self.scrape()
            nxt += self.interval_s
            now = loop.time()
            if nxt < now:
                nxt = now + self.interval_s
            await asyncio.sleep(nxt - now)
