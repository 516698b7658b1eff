"""Issue 38 item 3: a server's ``/metrics`` may legally say ``NaN`` or ``+Inf`` (and a
broken one ``-5`` or ``1e308``). Such a value is kept as missing, named in the
sample's ``dropped`` and in a caveat of the run; it is never stored as if true, and
a run's own files stay reportable -- also an older ``server_metrics.jsonl`` that
holds ``null`` (what the writer used to make of ``+Inf``)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from analysis import read_run
from analysis.judge import assess_run
from replay.cli import main
from replay.client import parse_prometheus
from replay.load import RunWriter
from replay.servers.sim import SimServerProcess
from tests.reliability.conftest import cli
from tests.replay.conftest import make_workload

_SCRAPE = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0"} 2
vllm:num_requests_waiting{engine="0"} NaN
vllm:kv_cache_usage_perc{engine="0"} +Inf
vllm:prompt_tokens_total{engine="0"} -5
vllm:generation_tokens_total{engine="0"} 1e308
"""


def test_unbelievable_values_are_written_as_missing_and_named(tmp_path: Path) -> None:
    values = parse_prometheus(_SCRAPE)
    w = RunWriter(tmp_path)
    w.write_metrics(1.0, values)
    w.close()
    lines = (tmp_path / "server_metrics.jsonl").read_bytes().splitlines()
    assert len(lines) == 1
    sample = orjson.loads(lines[0])  # strict JSON: no null, no Infinity
    assert sample["values"] == {"vllm:num_requests_running": 2.0}
    # NaN is skipped by the parser (it never was a number); the rest are named
    assert sample["dropped"] == ["vllm:generation_tokens_total", "vllm:kv_cache_usage_perc",
                                 "vllm:prompt_tokens_total"]
    assert b"null" not in lines[0] and b"Infinity" not in lines[0]


@pytest.fixture(scope="module")
def a_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("mv")
    wl = make_workload(tmp / "wl.jsonl", sessions=2, turns=2, output=4, think_s=0.0)
    out = tmp / "run"
    with SimServerProcess("small", time_scale=4.0) as srv:
        res = cli("run", "--target", srv.url, "--workload", str(wl), "--duration", "1",
                  "--warmup", "0.2", "--drain", "2", "--metrics-interval", "0.2",
                  "--out", str(out), "--quiet", timeout=120)
    assert res.returncode in (0, 3), res.stderr  # 3: a starved simulator stamped it invalid
    yield out


def _spoil(run: Path, dest: Path) -> Path:
    """A copy of ``run`` whose scrapes carry what an older writer or a broken server
    left: null (was +Inf), a negative and an absurd counter."""
    import shutil

    shutil.copytree(run, dest)
    path = dest / "server_metrics.jsonl"
    lines = path.read_bytes().splitlines()
    assert len(lines) >= 2, "the run has too few scrapes to spoil"
    spoiled = []
    for i, line in enumerate(lines):
        s = orjson.loads(line)
        s["values"]["vllm:kv_cache_usage_perc"] = None
        if i % 2:
            s["values"]["vllm:prompt_tokens_total"] = -5
            s["values"]["vllm:generation_tokens_total"] = 1e308
        spoiled.append(orjson.dumps(s))
    path.write_bytes(b"\n".join(spoiled) + b"\n")
    return dest


@pytest.mark.sim
def test_a_run_with_null_and_absurd_metrics_stays_reportable(
        a_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _spoil(a_run, tmp_path / "spoiled")
    data = read_run(run)
    kv = data.metrics.get("vllm:kv_cache_usage_perc")
    assert kv is None or bool(np_all_nan(kv))  # never a number it did not say
    prompt = data.metrics.get("vllm:prompt_tokens_total")
    assert prompt is not None and not any(v < 0 for v in prompt if not math.isnan(v))
    gen = data.metrics.get("vllm:generation_tokens_total")
    assert gen is not None and not any(v > 1e15 for v in gen if not math.isnan(v))
    assert data.metrics.dropped["vllm:kv_cache_usage_perc"] == len(
        (run / "server_metrics.jsonl").read_bytes().splitlines())
    reasons = [r for r in assess_run(data).reasons if r.code == "server_metric_unbelievable"]
    assert len(reasons) == 1 and reasons[0].severity == "caveat"
    for name in ("vllm:kv_cache_usage_perc", "vllm:prompt_tokens_total",
                 "vllm:generation_tokens_total"):
        assert name in reasons[0].message
    code = main(["report", str(run), "-o", str(tmp_path / "r.html"), "--no-charts"])
    err = capsys.readouterr().err
    assert code in (0, 3), err  # 3: the copy of a run a starved simulator stamped invalid
    assert "valid number" not in err and "Traceback" not in err
    assert "vllm:kv_cache_usage_perc" in (tmp_path / "r.html").read_text()


@pytest.mark.sim
def test_calibrate_reads_a_run_with_null_metrics(
        a_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _spoil(a_run, tmp_path / "spoiled")
    code = main(["calibrate", str(run), "-o", str(tmp_path / "twin.json")])
    err = capsys.readouterr().err
    # the fit may refuse one short run for what it lacks, never for the metrics file
    assert "valid number" not in err and "server_metrics" not in err, err
    assert "Traceback" not in err
    assert code in (0, 2, 3), err


def np_all_nan(values: object) -> bool:
    import numpy as np

    return bool(np.all(np.isnan(np.asarray(values, dtype=float))))
