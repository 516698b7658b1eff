"""The pure parts of bench/peers.py: steady window, workload, result parsers, table."""

from __future__ import annotations

import json
import math

import pytest


def _run_samples(peers, startup_s, startup_cpu, rate_tok_s, cpu_per_tok, run_s, tail_cpu):
    """A tool that burns CPU at start, streams at a steady rate, then writes a report."""
    out = []
    t = 0.0
    while t <= startup_s:
        out.append(peers.Sample(t, startup_cpu * t / startup_s, 0))
        t += 0.1
    t0 = t
    while t <= startup_s + run_s:
        tok = int(rate_tok_s * (t - t0))
        out.append(peers.Sample(t, startup_cpu + tok * cpu_per_tok, tok))
        t += 0.1
    last = out[-1]
    out.append(peers.Sample(t + 2.0, last.cpu + tail_cpu, last.tokens))
    return out


def test_steady_window_excludes_startup_and_report(peers):
    samples = _run_samples(peers, startup_s=3, startup_cpu=5.0, rate_tok_s=50_000,
                           cpu_per_tok=1 / 120_000, run_s=10, tail_cpu=2.0)
    w = peers.steady_window(samples)
    assert w is not None
    # truth: 120K tokens per CPU-second while streaming, 50K tokens per second
    assert w.tokens_per_cpu_s == pytest.approx(120_000, rel=0.01)
    assert w.tokens_per_s == pytest.approx(50_000, rel=0.02)
    assert 0.7 * samples[-1].tokens <= w.tokens <= 0.8 * samples[-1].tokens + 5_000
    # the whole-run figure is far lower: startup and report cost 7 CPU-s
    whole = samples[-1].tokens / samples[-1].cpu
    assert whole < 0.7 * w.tokens_per_cpu_s


def test_steady_window_needs_tokens(peers):
    assert peers.steady_window([]) is None
    assert peers.steady_window([peers.Sample(0, 0, 0), peers.Sample(1, 1, 0)]) is None
    # everything streamed between two samples: no stretch inside the window
    assert peers.steady_window([peers.Sample(0, 0, 0), peers.Sample(1, 1, 1000)]) is None


def test_window_busy_shares(peers):
    w = peers.Window(tokens=1000, cpu_s=1.5, wall_s=2.0, server_cpu_s=0.5)
    assert w.client_busy == pytest.approx(0.75)
    assert w.server_busy == pytest.approx(0.25)
    assert math.isnan(peers.Window(1, 0.0, 0.0).tokens_per_cpu_s)


def test_bench_workload_reads_back(peers, tmp_path):
    from traces import read_workload

    path = tmp_path / "w.jsonl"
    fp = peers.write_bench_workload(path, sessions=5, prompt_tokens=100, output_tokens=256)
    wl = read_workload(path)
    assert wl.header.fingerprint == fp != ""
    assert wl.header.sessions == len(wl.sessions) == 5
    blocks = set()
    for s in wl.sessions:
        (req,) = s.requests
        assert (req.prompt_tokens, req.output_tokens, req.think_time_s) == (100, 256, 0.0)
        assert len(req.new_block_ids) == 7  # ceil(100 / 16)
        blocks.update(req.new_block_ids)
    assert len(blocks) == 35  # no prompt shares a block with another


def test_tpot_from_agentreplay_records(peers):
    def rec(first, last, n, status="ok", phase="measure"):
        return json.dumps({"status": status, "phase": phase, "first_token_s": first,
                           "last_token_s": last, "output_tokens": n})

    lines = [
        rec(1.0, 1.0 + 255 * 0.010, 256),
        rec(2.0, 2.0 + 255 * 0.020, 256),
        rec(0.0, 9.0, 256, status="error"),
        rec(0.0, 9.0, 256, phase="warmup"),
        rec(0.0, 0.0, 1),
        "",
    ]
    assert peers.mean_tpot_ms_from_records(lines) == pytest.approx(15.0)
    assert peers.mean_tpot_ms_from_records([]) is None


def test_result_parsers(peers):
    assert peers.parse_vllm_result({"mean_tpot_ms": 10.5}) == 10.5
    assert peers.parse_vllm_result({}) is None
    g = {"benchmarks": [{"metrics": {"inter_token_latency_ms": {"successful": {"mean": 9.9}},
                                     "time_per_output_token_ms": {"successful": {"mean": 12}}}}]}
    assert peers.parse_guidellm_result(g) == 9.9
    assert peers.parse_guidellm_result({"benchmarks": []}) is None
    assert peers.parse_aiperf_result({"inter_token_latency": {"avg": 10.2}}) == 10.2
    assert peers.parse_aiperf_result({"inter_token_latency": None}) is None


def _res(peers, tool, mode, rate, ok=True, tpot=None, true=None):
    w = peers.Window(tokens=int(rate), cpu_s=1.0, wall_s=1.0)
    return peers.Result(tool, mode, ok=ok, steady=w if ok else None, whole_tokens=int(rate),
                        whole_cpu_s=2.0, tpot_ms=tpot, true_tpot_ms=true,
                        note="" if ok else "exit 1")


def test_ratio_uses_best_peer_not_bare(peers):
    results = [
        _res(peers, "bare", "batch", 300_000),
        _res(peers, "agentreplay", "batch", 200_000),
        _res(peers, "vllm", "batch", 160_000),
        _res(peers, "guidellm", "batch", 30_000),
        _res(peers, "aiperf", "batch", 500_000, ok=False),
        _res(peers, "agentreplay", "token", 80_000),
        _res(peers, "vllm", "token", 40_000),
    ]
    assert peers.ratio_vs_best_peer(results, "batch") == pytest.approx(1.25)
    assert peers.ratio_vs_best_peer(results, "token") == pytest.approx(2.0)
    assert math.isnan(peers.ratio_vs_best_peer(results[:2], "batch"))


def test_table_rows_and_distortion(peers):
    results = [
        _res(peers, "agentreplay", "batch", 200_000),
        _res(peers, "agentreplay", "stream", 50_000, tpot=10.2, true=10.0),
        _res(peers, "vllm", "batch", 100_000, ok=False),
        _res(peers, "vllm", "stream", 25_000, tpot=9.0, true=10.0),
    ]
    lines = peers.format_table(results, {"agentreplay": "0.1.0"}, ["agentreplay", "vllm"])
    assert len(lines) == 4
    assert all(line.count("|") == 10 for line in lines)
    ours, vllm = lines[2], lines[3]
    assert "200,000" in ours and "50,000" in ours and "+2.0%" in ours and "10.20 ms" in ours
    assert "failed: exit 1" in vllm and "25,000" in vllm and "-10.0%" in vllm
