"""The live view's figures from known records, and its plain rendering."""

from __future__ import annotations

import asyncio
import io

import pytest

from replay.load import LiveStats, LiveView, render_lines


def _rec(status: str, sent: float, first: float | None, last: float | None, n: int,
         due: float, phase: str = "measure") -> dict[str, object]:
    return {"status": status, "sent_s": sent, "due_s": due, "first_token_s": first,
            "last_token_s": last, "output_tokens": n, "phase": phase}


def test_stats_from_records() -> None:
    stats = LiveStats(total_s=100.0)
    for i in range(10):  # TTFT 0.1..1.0 s, TPOT 10 ms (100 tok/s), lag 1 ms
        stats.on_record(_rec("ok", 1.0, 1.0 + 0.1 * (i + 1), 1.0 + 0.1 * (i + 1) + 0.1, 11,
                             0.999))
    stats.on_record(_rec("error", 2.0, None, None, 0, 2.0))
    # Cut by the drain's end with a first token: counted apart, kept out of TTFT.
    stats.on_record(_rec("incomplete", 2.0, 2.001, None, 1, 2.0))
    stats.on_record(_rec("cancelled", 2.0, 2.001, None, 1, 2.0))
    # Warmup and drain requests are not the window's: left out of every figure.
    stats.on_record(_rec("ok", 0.1, 5.0, 9.0, 2, 0.0, phase="warmup"))
    stats.on_record(_rec("error", 9.0, None, None, 0, 8.0, phase="drain"))
    stats.on_metrics(1.0, {"vllm:prefix_cache_hits_total": 10, "vllm:prefix_cache_queries_total":
                           100, "vllm:kv_cache_usage_perc": 0.5})
    stats.on_metrics(2.0, {"vllm:prefix_cache_hits_total": 70, "vllm:prefix_cache_queries_total":
                           200, "vllm:kv_cache_usage_perc": 0.25})
    snap = stats.snapshot()
    assert (snap["done"], snap["failed"], snap["incomplete"], snap["cancelled"]) == (10, 1, 1, 1)
    assert snap["outside"] == 2
    assert snap["ttft_p50"] == pytest.approx(0.55)
    assert snap["inter_p50"] == pytest.approx(100.0)
    assert snap["lag_p99"] == pytest.approx(0.001, abs=1e-6)
    assert snap["prefix_hit_rate"] == pytest.approx(0.6)
    assert snap["kv_usage"] == 0.25
    text = "\n".join(render_lines(snap))
    assert "TTFT P50 550 ms" in text and "prefix hits 60%" in text and "failed 1" in text
    assert "incomplete 1" in text and "window only; 2 warmup/drain not counted" in text


def test_plain_mode_logs_a_final_line() -> None:
    stream = io.StringIO()

    async def go() -> None:
        task = asyncio.create_task(LiveView(LiveStats(5.0), "plain", 0.05, stream).run())
        await asyncio.sleep(0.12)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(go())
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 3 and all("requests done 0" in x for x in lines)


def test_rich_mode_renders() -> None:
    stream = io.StringIO()

    async def go() -> None:
        task = asyncio.create_task(LiveView(LiveStats(5.0), "rich", 0.02, stream).run())
        await asyncio.sleep(0.08)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(go())
    assert "agentreplay run" in stream.getvalue()
