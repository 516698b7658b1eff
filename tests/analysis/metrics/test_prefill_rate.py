"""Prefill rate per request (uncached prompt tokens / TTFT), on hand-built records with
the answers worked out by hand: a metric added by its declaration alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis import compare_runs, read_run, read_runs, render_report
from analysis.metrics import RunSummary, measure, metric, pool, summarize
from analysis.report._detail import level_rows
from tests.analysis.builders import make_run, rec

# window [10, 110)
RECORDS = [
    # server counts: 1000 prompt, 200 cached -> 800 uncached over TTFT 2 s = 400 tok/s
    rec(0, user=0, sent_s=20.0, first_token_s=22.0, last_token_s=23.0, prompt_tokens=1000,
        prompt_tokens_server=1000, cached_tokens=200),
    # no server counts: 600 prompt, 100 expected cached -> 500 over 0.5 s = 1000 tok/s
    rec(1, user=1, sent_s=30.0, first_token_s=30.5, last_token_s=31.0, prompt_tokens=600,
        expected_cached_tokens=100),
    # a fully cached prompt: no prefill to rate (left out, never 0 tok/s)
    rec(2, user=1, sent_s=40.0, first_token_s=40.1, last_token_s=41.0, prompt_tokens=100,
        prompt_tokens_server=100, cached_tokens=100),
    # failed, and cut before its first token: no TTFT, no rate (and no bound)
    rec(3, user=0, sent_s=50.0, status="error", error_kind="http_500",
        first_token_s=None, last_token_s=None, output_tokens=0),
    rec(4, user=2, sent_s=105.0, status="incomplete", first_token_s=None,
        last_token_s=None, output_tokens=0, output_tokens_asked=50),
    # sent in the warmup: outside the window
    rec(5, user=2, sent_s=5.0, first_token_s=6.0, last_token_s=7.0, prompt_tokens=5000),
]


@pytest.fixture()
def run_dir(tmp_path: Path) -> Path:
    return make_run(tmp_path / "run1", RECORDS)


def test_prefill_rate_per_request(run_dir: Path) -> None:
    samples = measure(read_run(run_dir))
    assert sorted(samples.values["prefill_rate"]) == [400.0, 1000.0]
    assert "prefill_rate" not in samples.censored
    s = summarize(samples, bootstrap=False)
    assert s.prefill_rate is not None and s.prefill_rate.count == 2
    assert s.prefill_rate.unit == "tok/s" and s.prefill_rate.higher_is_better
    assert s.prefill_rate.p50 == pytest.approx(700.0)
    assert s.prefill_rate.p90 == pytest.approx(460.0)  # a rate: the slow tail (10th pct)


def test_prefill_rate_pools_repeats(run_dir: Path) -> None:
    other = make_run(run_dir.parent / "run2", RECORDS[:1], run_id="run2")
    s = summarize(pool([measure(read_run(run_dir)), measure(read_run(other))]),
                  bootstrap=False)
    assert s.prefill_rate is not None and s.prefill_rate.count == 3
    assert s.prefill_rate.p50 == pytest.approx(400.0)


def test_prefill_rate_in_the_report_and_old_summaries(run_dir: Path) -> None:
    runs = read_runs([run_dir])
    c = compare_runs(runs)
    rows = {r["label"]: r["cells"][0] for r in level_rows(c.levels[0], c.arms, [])}
    assert rows["P50 prefill rate per request (tok/s)"][0] == "700.0"
    page = render_report(c, runs, charts=False)
    assert metric("prefill_rate").definition in page
    old = c.levels[0].arms[c.arms[0]].model_dump(exclude={"prefill_rate"})
    back = RunSummary.model_validate(old)  # written before the metric: shown as n/a
    assert back.prefill_rate is None
    c.levels[0].arms[c.arms[0]] = back
    rows = {r["label"]: r["cells"][0] for r in level_rows(c.levels[0], c.arms, [])}
    assert rows["P50 prefill rate per request (tok/s)"] == ("n/a", "")
