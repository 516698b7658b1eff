"""The HTML report: self-contained, escaped, renders in headless Chromium; the CLI."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import orjson
import pytest

from analysis import compare_runs, read_runs, render_report
from analysis.report import requests_csv
from replay.cli import main
from tests.analysis.builders import config, make_run, synth_records

EVIL = "<script>alert(1)</script>"
_NAMESPACES = ('xmlns="http://www.w3.org/2000/svg"', 'xmlns:xlink="http://www.w3.org/1999/xlink"')


def _make_comparison(root: Path, *, unfair: bool = False, simulated: bool = True) -> Path:
    for backend, tpot in (("auto", 0.02), ("latency_specialized", 0.012)):
        for users in (2, 6):
            recs = synth_records(users=users, per_user=8, tpot=tpot * (1 + users / 8),
                                 ttft=0.2, seed=users, errors=1)
            recs[0]["error_message"] = f"engine said {EVIL}"
            recs[0]["error_kind"] = "stream_error"
            end = max(r["last_token_s"] or 0 for r in recs) + 1.0
            cfg = config(backend, model_config__model=EVIL)
            cfg["additional_config"]["note"] = EVIL
            if unfair and backend != "auto":
                cfg["scheduler_config"]["max_num_seqs"] = 256
            metrics = [{"t_s": float(t), "values": {
                "vllm:kv_cache_usage_perc": 0.2 + 0.01 * t,
                "vllm:prefix_cache_hits_total": 40.0 * t,
                "vllm:prefix_cache_queries_total": 100.0 * t}} for t in range(int(end) + 2)]
            make_run(root / f"{backend}-{users}", recs, metrics=metrics, label=backend,
                     run_id=f"{backend}-{users}", model=EVIL, simulated=simulated,
                     server_info={"vllm_config": cfg},
                     load={"users": users, "duration_s": 100, "warmup_s": 10, "drain_s": 5},
                     window={"start_s": 10.0, "end_s": end})
    return root


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    root = _make_comparison(tmp_path_factory.mktemp("cmp"))
    runs = read_runs([root])
    html = render_report(compare_runs(runs), runs)
    out = root / "report.html"
    out.write_text(html, encoding="utf-8")
    return html, out


def test_no_external_address(report: tuple[str, Path]) -> None:
    html, _ = report
    stripped = html
    for ns in _NAMESPACES:
        stripped = stripped.replace(ns, "")
    assert "http://" not in stripped and "https://" not in stripped
    assert "<!DOCTYPE svg" not in html and "svg11.dtd" not in html
    # the target address is still shown, with its slashes as character references
    assert "http:&#47;&#47;127.0.0.1:8000" in html


def test_hostile_strings_are_escaped(report: tuple[str, Path]) -> None:
    html, _ = report
    assert "<script" not in html.lower()
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert html.count(escaped) >= 3  # model name, config field, error message
    assert f"engine said {escaped}" in html
    assert "additional_config.note" in html


def test_sections_and_fairness_wording(report: tuple[str, Path]) -> None:
    html, _ = report
    order = [html.index(f'<section id="{s}">') for s in (
        "decision", "pareto", "summary", "capacity", "headline", "fairness", "metrics",
        "charts", "setup", "methodology", "data")]
    assert order == sorted(order)  # decision first, capacity before the per-level detail
    assert "same GPU count" in html
    assert "SIMULATED" in html
    assert html.count("<svg") == 6  # the Pareto and headline charts, four detail charts
    assert "1 / P90(TPOT)" in html  # methodology table
    assert "UNFAIR" not in html


def test_unfair_override_warns_in_every_section(tmp_path: Path) -> None:
    runs = read_runs([_make_comparison(tmp_path, unfair=True)])
    html = render_report(compare_runs(runs, allow_unfair=True), runs, charts=False)
    sections = html.count("<section ")
    assert sections == 11
    assert html.count('class="banner unfair"') >= sections + 1
    assert "scheduler_config.max_num_seqs" in html


def test_single_run_report(tmp_path: Path) -> None:
    root = _make_comparison(tmp_path, simulated=False)
    runs = read_runs([root / "auto-2"])
    html = render_report(compare_runs(runs), runs, charts=False)
    assert "SIMULATED" not in html
    assert '<section id="fairness">' not in html and "Fair comparison" not in html
    assert "vary across levels" not in html and "The load varies" not in html
    title = re.search(r"<h1>(.*?)</h1>", html, re.S)
    assert title is not None and "run report: auto" in title.group(1)


def test_requests_csv(tmp_path: Path) -> None:
    import csv
    import io

    runs = read_runs([_make_comparison(tmp_path)])
    rows = list(csv.DictReader(io.StringIO(requests_csv(runs))))
    assert len(rows) == sum(len(r.requests) for r in runs)
    ok = next(r for r in rows if r["status"] == "ok")
    assert float(ok["ttft_s"]) == pytest.approx(float(ok["first_token_s"]) - float(ok["sent_s"]))
    bad = next(r for r in rows if r["status"] == "error")
    assert bad["ttft_s"] == "" and EVIL in bad["error_message"]


@pytest.mark.browser
def test_headless_chromium_renders_without_console_errors(
    report: tuple[str, Path], tmp_path: Path
) -> None:
    from PIL import Image

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "chromium is missing: run scripts/setup_test_env.sh"
    _, path = report
    shot = tmp_path / "shot.png"
    proc = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--no-first-run",
         f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}",
         "--window-size=1200,3000", "--enable-logging=stderr", "--v=0",
         path.resolve().as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    console = [line for line in proc.stderr.splitlines() if "CONSOLE" in line]
    assert console == []
    assert shot.exists()
    pixels = np.asarray(Image.open(shot).convert("L"), dtype=np.float64)
    assert pixels.shape == (3000, 1200)
    assert pixels.var() > 100.0  # a blank page has variance 0


def test_cli_report_and_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _make_comparison(tmp_path)
    out = tmp_path / "out" / "report.html"
    assert main(["report", str(root), "-o", str(out), "--slo", "30:10", "--no-charts"]) == 0
    assert out.exists()
    summary = orjson.loads((out.parent / "report.summary.json").read_bytes())
    assert summary["kind"] == "agentreplay-comparison"
    assert summary["tiers"] == [{"floor_tok_s": 30.0, "ttft_s": 10.0}]
    assert (out.parent / "report.requests.csv").read_text().startswith("run_id,")
    capsys.readouterr()
    assert main(["plan", str(root), "--slo", "30:10", "--slo", "100:10"]) == 0
    text = capsys.readouterr().out
    assert "Capacity" in text and "latency_specialized" in text
    table = text[:text.index("[SIMULATED] Capacity at")]  # the table, then the decision
    assert len(re.findall(r"tok/s/user", table)) == 2  # one row per tier
    assert len(re.findall(r"^(?:\[SIMULATED\] )?Capacity at ", text, re.M)) == 2
    assert "latency_specialized / auto" in text  # the arms' capacity ratio
    assert "interpolat" not in text.replace("nothing interpolated", "")
    assert re.search(r"between \d+ and \d+ users|at least \d+ users|below \d+ users?", text)


def test_cli_refuses_unfair_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _make_comparison(tmp_path, unfair=True)
    assert main(["report", str(root), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert "max_num_seqs" in err and "Traceback" not in err
    assert main(["plan", str(root), "--slo", "nonsense"]) == 2
