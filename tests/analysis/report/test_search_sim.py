"""``compare --search`` against the two simulated backends: its answers checked against
analysis' own verdicts on the runs it left behind, and shown in the report."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from analysis import bracket_of, compare_runs, parse_tier, read_run, read_runs
from replay.cli import main

pytestmark = pytest.mark.sim


def _workload(path: Path) -> Path:
    from traces import generate, write_workload

    header, sessions = generate("coding-agent", sessions=12, seed=0, block_size=64,
                                prompt_scale=0.05, think_scale=0.02)
    write_workload(path, header, sessions)
    return path


@pytest.mark.slow  # minutes on the 2-core machine: started first under xdist
def test_compare_search_against_the_simulated_backends(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    from replay.ab import DEMO_PROFILE
    from replay.servers.sim import SimServerProcess

    wl = _workload(tmp_path / "wl.jsonl")
    out = tmp_path / "search"
    with SimServerProcess(DEMO_PROFILE, "auto") as a, \
            SimServerProcess(DEMO_PROFILE, "latency_specialized") as b:
        rc = main(["compare", "--arm", f"auto={a.url}", "--arm", f"latency_specialized={b.url}",
                   "--workload", str(wl), "--duration", "6", "--warmup", "2", "--drain", "30",
                   "--users", "2", "--out", str(out), "--search", "120:15",
                   "--search-max-users", "8",
                   "--quiet"])
    assert rc in (0, 3)  # 3: a probe was stamped invalid (a starved machine), said so
    printed = capsys.readouterr().out
    # labelled simulated: the search's answer, the decision the report opens with (its
    # first line) and the validity
    assert printed.count("[SIMULATED] ") == 3 and "report:" in printed
    assert "[SIMULATED] Capacity at " in printed
    data = orjson.loads((out / "search.json").read_bytes())
    tier = parse_tier("120:15")
    assert {r["arm"] for r in data["results"]} == {"auto", "latency_specialized"}
    # on an idle machine both arms get an answer; a starved one may stop a search, and
    # then the command says so with exit 3
    stopped = [r for r in data["results"] if r["ended"] == "invalid"]
    assert rc == (3 if stopped else 0), (rc, data["results"])
    for r in data["results"]:
        ev = {e["users"]: e for e in r["evidence"]}
        for e in r["evidence"]:  # each verdict is analysis' verdict on that run directory
            runs = [read_run(out / "runs" / f"{r['arm']}-u{e['users']}-r{k}")
                    for k in range(e["runs"])]  # an indeterminate probe is run again
            c = compare_runs(runs, tiers=[tier])
            g = c.levels[0].arms[r["arm"]].goodput[0]
            expected = "invalid" if c.validity.verdict == "invalid" else g.judged()
            assert e["verdict"] == expected
        lo, hi = r["bracket"]
        # the answer is the bracket of the probes, as a sweep's capacity table reads it
        # (every probe invalid on a starved machine: no evidence, and the answer says so)
        met = {"meets": True, "fails": False, "indeterminate": None}
        known = [(u, met[e["verdict"]]) for u, e in ev.items() if e["verdict"] != "invalid"]
        assert r["answer"] == (bracket_of(known).text() if known else "no answer")
        assert str(r["answer"]) in printed
        if r["ended"] in ("invalid", "probe limit", "indeterminate"):
            assert r["ended"] != "invalid" or any(e["verdict"] == "invalid"
                                                  for e in r["evidence"])
            continue
        if lo is not None:
            assert ev[lo]["verdict"] == "meets" and r["users"] == lo
        if hi is not None:
            assert ev[hi]["verdict"] == "fails" and (lo is None or hi == lo + 1)
        else:
            assert r["ended"] == "at least" and lo == 8
        assert min(ev) >= 2  # the search starts at the first --users count
    answers = {r["arm"]: r["users"] for r in data["results"] if r["ended"] != "invalid"}
    if len(answers) == 2 and None not in answers.values():  # the faster backend serves more
        assert answers["latency_specialized"] >= answers["auto"]
    # the probes are ordinary run directories: report reads them and shows the search
    runs = read_runs([out])
    assert len(runs) == sum(e["runs"] for r in data["results"] for e in r["evidence"])
    html = (out / "report.html").read_text(encoding="utf-8")
    assert '<section id="search">' in html and "capacity (measured bracket)" in html
    assert html.index('<section id="search">') < html.index('<section id="metrics">')
