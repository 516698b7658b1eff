"""bench/peers.py ratio lines: the stub's busy share beside each ratio, and the flags
that say when a ratio may measure the stub or an idle peer instead of the clients."""

from __future__ import annotations

import math
import re

import pytest


def _run(peers, tool, mode, rate, *, client=1.0, server=0.1):
    """A run whose window is one wall second: busy shares are the CPU-seconds given."""
    w = peers.Window(tokens=int(rate * client), cpu_s=client, wall_s=1.0, server_cpu_s=server)
    return peers.Result(tool, mode, ok=True, steady=w)


def _fields(line):
    name, _, rest = line.partition("=")
    value, *flags = rest.split(" ")
    return name, float(value), dict(f.split("=", 1) for f in flags if "=" in f), \
        [f for f in flags if "=" not in f]


def test_ratio_line_names_the_best_peer_and_both_busy_shares(peers):
    results = [
        _run(peers, "bare", "token", 900_000, server=0.9),  # the reference, never a peer
        _run(peers, "agentreplay", "token", 300_000, client=0.99, server=0.45),
        _run(peers, "vllm", "token", 150_000, client=0.97, server=0.25),
        _run(peers, "guidellm", "token", 20_000, server=0.05),
    ]
    name, ratio, kv, flags = _fields(peers.ratio_line(results, "token"))
    assert name == "ratio_vs_best_peer_token_mode"
    assert ratio == pytest.approx(2.0)
    assert kv == {"best_peer": "vllm", "stub_busy": "45%/25%", "client_busy": "99%/97%"}
    assert flags == []


@pytest.mark.parametrize("ours,theirs,bound", [(0.61, 0.2, True), (0.2, 0.75, True),
                                               (0.6, 0.6, False)])
def test_server_bound_when_the_stub_was_over_60_percent_in_either_run(peers, ours, theirs,
                                                                       bound):
    results = [_run(peers, "agentreplay", "batch", 400_000, server=ours),
               _run(peers, "aiperf", "batch", 100_000, server=theirs)]
    line = peers.ratio_line(results, "batch")
    assert line.startswith("ratio_vs_best_peer=4.00 best_peer=aiperf")
    assert ("server-bound" in line.split()) is bound


def test_stream_line_flags_a_peer_client_under_half_busy(peers):
    idle = [_run(peers, "agentreplay", "stream", 60_000, client=0.3),
            _run(peers, "vllm", "stream", 30_000, client=0.49)]
    busy = [_run(peers, "agentreplay", "stream", 60_000, client=0.3),
            _run(peers, "vllm", "stream", 30_000, client=0.5)]
    assert re.fullmatch(r"ratio_vs_best_peer_stream=2\.00 best_peer=vllm stub_busy=10%/10% "
                        r"client_busy=30%/49% peer-underloaded", peers.ratio_line(idle, "stream"))
    assert "peer-underloaded" not in peers.ratio_line(busy, "stream")
    # the flag belongs to stream mode: a throughput run's client is saturated by design
    token = [_run(peers, "agentreplay", "token", 60_000, client=0.3),
             _run(peers, "vllm", "token", 30_000, client=0.4)]
    assert "peer-underloaded" not in peers.ratio_line(token, "token")


def test_ratio_line_without_a_peer_is_the_bare_nan(peers):
    results = [_run(peers, "agentreplay", "stream", 60_000), _run(peers, "bare", "stream", 1e6)]
    assert peers.ratio_line(results, "stream") == "ratio_vs_best_peer_stream=nan"
    assert math.isnan(peers.ratio_vs_best_peer(results, "stream"))


def test_fixed_count_tools_get_about_a_run_of_requests(peers):
    # stream: 64 users stepping every 10 ms finish 64 / 2.56 s = 25 requests a second
    assert peers._num_prompts("stream", 64, 30.0, None) == int(64 / 2.56 * 30)
    assert peers._num_prompts("stream", 64, 1.0, None) == 128  # never under 2 per user
    # throughput: 70% of what the bare loop managed, at least 4 per user
    assert peers._num_prompts("token", 64, 10.0, 100.0) == 700
    assert peers._num_prompts("batch", 64, 1.0, 100.0) == 256
