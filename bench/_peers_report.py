"""What bench/peers.py prints: one line per run, the ratio lines, the Markdown table.

Pure: takes :class:`Result` values, returns strings. A ratio is taken within one
run of the harness (agentreplay and the best peer measured minutes apart on the
same host), and beside it stands what could make it measure something else: the
stub server's busy share in both runs (``server-bound`` over
:data:`SERVER_BOUND`, where the stub rather than the client may set the pace)
and, in stream mode, whether the best peer's client was kept at least
:data:`PEER_LOADED` busy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from _peers_measure import Window
from _peers_tools import PEERS

SERVER_BOUND = 0.60
"""Stub busy share above which a ratio is marked ``server-bound``."""
PEER_LOADED = 0.50
"""Client busy share the best peer must reach in stream mode (else ``peer-underloaded``)."""
RATIO_NAMES = {
    "batch": "ratio_vs_best_peer",
    "token": "ratio_vs_best_peer_token_mode",
    "stream": "ratio_vs_best_peer_stream",
}


@dataclass
class Result:
    """One tool in one server mode."""

    tool: str
    mode: str
    ok: bool
    note: str = ""
    steady: Window | None = None
    whole_tokens: int = 0
    whole_cpu_s: float = 0.0
    wall_s: float = 0.0
    tpot_ms: float | None = None
    true_tpot_ms: float | None = None
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def whole_tokens_per_cpu_s(self) -> float:
        return self.whole_tokens / self.whole_cpu_s if self.whole_cpu_s > 0 else math.nan

    @property
    def rate(self) -> float:
        """Steady tokens per client CPU-second; NaN when the run failed or had no window."""
        return self.steady.tokens_per_cpu_s if self.ok and self.steady is not None else math.nan


def _find(results: Sequence[Result], tool: str, mode: str) -> Result | None:
    for r in results:
        if r.tool == tool and r.mode == mode and not math.isnan(r.rate):
            return r
    return None


def best_peer(results: Sequence[Result], mode: str) -> Result | None:
    """The peer (never ``bare``) with the most steady tokens per CPU-second in ``mode``."""
    found = [r for r in (_find(results, p, mode) for p in PEERS) if r is not None]
    return max(found, key=lambda r: r.rate, default=None)


def ratio_vs_best_peer(results: Sequence[Result], mode: str = "batch") -> float:
    """agentreplay's steady tokens per CPU-second over the best peer's in ``mode``."""
    ours, peer = _find(results, "agentreplay", mode), best_peer(results, mode)
    if ours is None or peer is None:
        return math.nan
    return ours.rate / peer.rate


def ratio_line(results: Sequence[Result], mode: str) -> str:
    """``<name>=X.XX`` and, beside it, the best peer, the stub's busy share in both
    runs (agentreplay's / the peer's), both clients' busy shares and the flags."""
    name = RATIO_NAMES.get(mode, f"ratio_vs_best_peer_{mode}")
    ratio = ratio_vs_best_peer(results, mode)
    line = f"{name}={ratio:.2f}"
    ours, peer = _find(results, "agentreplay", mode), best_peer(results, mode)
    if ours is None or peer is None or ours.steady is None or peer.steady is None:
        return line
    stub = (ours.steady.server_busy, peer.steady.server_busy)
    client = (ours.steady.client_busy, peer.steady.client_busy)
    line += (f" best_peer={peer.tool} stub_busy={stub[0]:.0%}/{stub[1]:.0%}"
             f" client_busy={client[0]:.0%}/{client[1]:.0%}")
    if max(stub) > SERVER_BOUND:
        line += " server-bound"
    if mode == "stream" and client[1] < PEER_LOADED:
        line += " peer-underloaded"
    return line


def _fmt(v: float | None, spec: str = ",.0f") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return format(v, spec)


def _failed(r: Result | None) -> str:
    if r is None:
        return "-"
    return f"failed: {r.note}"[:40] if not r.ok else "no window"


def format_table(results: Sequence[Result], versions: dict[str, str], tools: Sequence[str]) -> (
    list[str]
):
    """The results as a Markdown table, one row per tool; TPOT and its distortion
    against the stub's measured step come from the stream run (10 ms steps)."""
    by = {(r.tool, r.mode): r for r in results}
    head = [
        "| tool | version | batch: tok/CPU-s | batch: whole-run tok/CPU-s | token: tok/CPU-s "
        "| stream: tok/CPU-s | stream: client busy | TPOT @10 ms step | distortion |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = []
    for tool in tools:
        cells = [tool, versions.get(tool, "")]
        batch, token, stream = (by.get((tool, m)) for m in ("batch", "token", "stream"))
        cells.append(_fmt(batch.rate) if batch and batch.steady else _failed(batch))
        cells.append(_fmt(batch.whole_tokens_per_cpu_s) if batch and batch.ok else "-")
        cells.append(_fmt(token.rate) if token and token.steady else _failed(token))
        if stream is not None and stream.steady is not None:
            cells += [_fmt(stream.rate), f"{stream.steady.client_busy:.0%}"]
        else:
            cells += [_failed(stream), "-"]
        d = stream
        if d is None or not d.ok or d.tpot_ms is None or d.true_tpot_ms is None:
            cells += ["-" if d is None else (d.note[:40] or "no TPOT"), "-"]
        else:
            dist = (d.tpot_ms - d.true_tpot_ms) / d.true_tpot_ms * 100
            cells += [f"{d.tpot_ms:.2f} ms", f"{dist:+.1f}%"]
        rows.append("| " + " | ".join(cells) + " |")
    return head + rows


def describe(r: Result) -> str:
    """One run as one line: steady figures with both busy shares, whole-run figure,
    and the TPOT the tool reported against the stub's measured step."""
    if not r.ok:
        return f"{r.tool:12s} {r.mode:6s} FAILED {r.note}"
    s = r.steady
    steady = (f"steady {s.tokens_per_cpu_s:>9,.0f} tok/CPU-s {s.tokens_per_s:>9,.0f} tok/s "
              f"(client {s.client_busy:4.0%}, server {s.server_busy:4.0%} busy)"
              if s else "steady -")
    tpot = f" tpot {r.tpot_ms:.3f} ms" if r.tpot_ms is not None else ""
    true = f" (server {r.true_tpot_ms:.3f} ms)" if r.true_tpot_ms is not None else ""
    running = r.extra.get("mean_running")
    if isinstance(running, float) and r.true_tpot_ms is not None:
        true += f" mean running {running:.1f}"
    stamp = r.extra.get("validity")
    stamped = f"  run stamped {stamp}" if isinstance(stamp, str) and stamp.startswith(
        "invalid") else ""
    return (f"{r.tool:12s} {r.mode:6s} {steady}  whole {r.whole_tokens_per_cpu_s:>9,.0f} "
            f"tok/CPU-s  wall {r.wall_s:5.1f} s  {r.extra.get('requests')} req{tpot}{true}"
            f"{stamped}")
