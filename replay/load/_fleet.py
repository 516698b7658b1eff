"""A fleet as one target: probe every replica, check they are alike, scrape each.

``run --target A --target B`` measures several servers as they are served
together (routing: :mod:`replay.load._routing`). Before any load each replica is
probed and must serve the same model with the same limits and, where it exposes
``/server_info``, the same configuration (``analysis.replica_diffs``; the decode
backend included): a fleet whose servers differ is not one thing to measure.
``run.json`` lists the replicas (URLs without credentials, each one's server
facts); every replica's ``/metrics`` is scraped into ``server_metrics.jsonl``
with its index (``replica``), as every request record carries the replica that
answered it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import aiohttp

from analysis import RunManifest, duplicate_replica, replica_diffs, split_metric_values
from analysis.schema import Replica
from replay.client import MetricsPoller, ServerFacts, connect_url, probe_server, public_target
from replay.errors import ConfigError, TargetError
from replay.load._names import url_problem
from replay.load._settings import RunSettings

__all__ = ["FleetMetrics", "check_fleet", "describe_fleet", "fleet_roots", "probe_fleet",
           "replicas_of", "split_targets"]

_SAME = ("model", "max_model_len", "vocab_size", "block_size", "simulated")
"""Server facts every replica must share (beyond its ``/server_info``)."""


def split_targets(text: str, flag: str = "--arm") -> tuple[str, ...]:
    """``"URL1,URL2"`` (a compare arm served by several replicas) -> its URLs; an empty
    part or one server given twice (:func:`analysis.duplicate_replica`) is a one-line error
    naming ``flag``."""
    urls = tuple(u.strip() for u in text.split(","))
    if not all(urls):
        raise ConfigError(f"{flag} {text!r}: give the replicas' URLs separated by commas, "
                          "e.g. http://a:8000,http://b:8000")
    for u in urls:
        problem = url_problem(u)
        if problem is not None:
            raise ConfigError(f"{flag}: {problem}")
    twice = duplicate_replica(urls)
    if twice is not None:
        raise ConfigError(f"{flag}: {twice}")
    return urls


def fleet_roots(settings: RunSettings) -> tuple[tuple[str, ...], str | None]:
    """Every replica's base URL without user info, and the one Basic ``Authorization``
    their URLs carry (None when none does). Replicas with different credentials in
    their URLs are refused: one run sends one set of headers."""
    pairs = [connect_url(url) for url in settings.fleet]
    basics = {basic for _, basic in pairs}
    if len(basics) > 1:
        raise ConfigError("--target: the replicas' URLs carry different credentials; give "
                          "the same user:password in each (or none, and --api-key-env)")
    return tuple(root for root, _ in pairs), pairs[0][1]


async def probe_fleet(session: aiohttp.ClientSession, settings: RunSettings,
                      headers: dict[str, str]) -> list[ServerFacts]:
    """Probe every replica (the first as a single-server run does) and refuse a fleet
    whose servers serve different models, limits or configurations (:func:`check_fleet`)."""
    facts: list[ServerFacts] = []
    for url in settings.fleet:
        facts.append(await probe_server(session, url, headers, model=settings.model,
                                        vocab_size=settings.vocab_size,
                                        block_size=settings.server_block_size))
    first = facts[0]
    for k, other in enumerate(facts[1:], start=1):
        for name in _SAME:
            a, b = getattr(first, name), getattr(other, name)
            if a != b:
                raise TargetError(_unlike(settings.fleet, k, name, a, b))
    check_fleet(replicas_of(settings.fleet, facts), settings.fleet)
    return facts


def replicas_of(fleet: Sequence[str], facts: Sequence[ServerFacts]) -> list[Replica]:
    """The manifest's ``replicas`` (none for a single server)."""
    if len(facts) < 2:
        return []
    return [Replica(target=public_target(url), model=f.model, server_info=f.server_info,
                    gpu_count=f.gpu_count) for url, f in zip(fleet, facts, strict=True)]


def describe_fleet(manifest: RunManifest, fleet: Sequence[str], facts: Sequence[ServerFacts],
                   routing: str | None) -> None:
    """Stamp a fleet in the manifest: its replicas, routing, and its GPU count (the
    replicas' sum, which per-GPU figures divide by)."""
    manifest.replicas = replicas_of(fleet, facts)
    if not manifest.replicas:
        return
    manifest.routing = "round-robin" if routing == "round-robin" else "affinity"
    counts = [f.gpu_count for f in facts]
    manifest.gpu_count = None if None in counts else sum(c or 0 for c in counts)


def check_fleet(replicas: Sequence[Replica], fleet: Sequence[str],
                flag: str = "--target") -> None:
    """Refuse replicas whose ``/server_info`` differ in anything that changes how
    requests are served (what a comparison's fairness check would refuse, the decode
    backend included); the error names ``flag``, the replica and the fields."""
    for k in range(1, len(replicas)):
        refused = [d for d in replica_diffs([replicas[0], replicas[k]])
                   if d.verdict == "refused"]
        if refused:
            d = refused[0]
            names = [x.field.removeprefix("replicas.") for x in refused]
            more = f" (and {len(names) - 1} more: {', '.join(names[1:4])}" \
                f"{', ...' if len(names) > 4 else ''})" if len(names) > 1 else ""
            raise TargetError(_unlike(fleet, k, names[0], d.baseline, d.other, flag, more))


def _unlike(fleet: Sequence[str], k: int, name: str, a: object, b: object,
            flag: str = "--target", more: str = "") -> str:
    return (f"{flag}: replica {k} ({public_target(fleet[k])}) differs from replica 0 "
            f"({public_target(fleet[0])}) in {name}: {a} vs {b}{more}; a fleet is measured "
            "as one server, so start every replica with the same model and configuration")


class FleetMetrics:
    """One ``/metrics`` poller per replica; each sample written with its replica, and
    the live view fed the fleet's sum (KV cache usage: the replicas' mean)."""

    def __init__(self, session: aiohttp.ClientSession, roots: Sequence[str], interval_s: float,
                 write: Callable[[float, dict[str, float], int], None],
                 show: Callable[[float, dict[str, float]], None], t0_ns: int,
                 headers: dict[str, str]) -> None:
        self._write, self._show = write, show
        self._latest: list[dict[str, float]] = [{} for _ in roots]
        self.pollers = [MetricsPoller(session, f"{root}/metrics", interval_s,
                                      self._sink(k), t0_ns, headers=headers)
                        for k, root in enumerate(roots)]

    def _sink(self, k: int) -> Callable[[float, dict[str, float]], None]:
        def sink(t_s: float, values: dict[str, float]) -> None:
            self._write(t_s, values, k)  # the writer names what it drops
            self._latest[k] = split_metric_values(values)[0]
            self._show(t_s, self._fleet() if len(self._latest) > 1 else self._latest[k])

        return sink

    def _fleet(self) -> dict[str, float]:
        total: dict[str, float] = {}
        for values in self._latest:
            for name, v in values.items():
                total[name] = total.get(name, 0.0) + v
        kv = [v["vllm:kv_cache_usage_perc"] for v in self._latest
              if "vllm:kv_cache_usage_perc" in v]
        if kv:
            total["vllm:kv_cache_usage_perc"] = sum(kv) / len(kv)
        return total

    async def run(self) -> None:
        """Every poller on its own grid, until cancelled."""
        import asyncio

        await asyncio.gather(*(p.run() for p in self.pollers))

    async def scrape(self) -> None:
        """One last scrape of every replica (after the load)."""
        for p in self.pollers:
            await p.scrape()
