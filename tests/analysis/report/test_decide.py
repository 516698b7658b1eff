"""The decision sentence (``analysis.report.decide``): per tier each arm's measured
bracket with users per GPU printed as bounds, the capacity ratio, validity, then the
interactivity verdict; the very lines the terminal prints and the report opens with."""

from __future__ import annotations

import html as htmllib
import re
from pathlib import Path

import pytest

from analysis import compare_runs, parse_tier, read_runs, report_bundle
from analysis.report import decide, per_gpu_text
from tests.analysis.report.builders import make_sweep

# make_sweep: 2 GPUs per run (tiny-llama config); P90 interactivity auto ~104/77/38 and
# latency_specialized ~185/137/67 tok/s/user at 1/4/16 users; P90 TTFT 68/115/299 ms
TIERS = [parse_tier("60:2"), parse_tier("150:1"), parse_tier("30:0.1")]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object, list]:
    # 40 requests per user: enough for every level to tell met from failed
    root = make_sweep(tmp_path_factory.mktemp("decide"), per_user=40)
    runs = read_runs([root])
    return root, compare_runs(runs, tiers=TIERS), runs


def test_per_gpu_bounds_are_bounds() -> None:
    assert per_gpu_text(4, 16, 2) == "2.00 \u2013 8.00 users per GPU"
    assert per_gpu_text(16, None, 2) == "\u2265 8.00 users per GPU"
    assert per_gpu_text(None, 1, 4) == "< 0.25 users per GPU"
    assert per_gpu_text(0.5, 1.0, 2, "rate") == "0.25 \u2013 0.50 sessions/s per GPU"
    assert "unknown" in per_gpu_text(4, 16, None)


def test_each_tier_reads_its_brackets_per_gpu_and_ratio(sweep: tuple) -> None:
    _, c, _ = sweep
    d = decide(c)
    lines = d.lines()
    assert len(d.tiers) == 3 and len(lines) == 5
    t60, t150, t30 = lines[:3]
    # 60 tok/s: auto met at 4 (77), failed at 16 (38); latency_specialized met everywhere
    assert t60.startswith("[SIMULATED] Capacity at \u2265 60 tok/s/user, TTFT \u2264 2 s: ")
    assert "auto between 4 and 16 users measured (2.00 \u2013 8.00 users per GPU)" in t60
    assert "latency_specialized at least 16 users measured (\u2265 8.00 users per GPU)" in t60
    assert "latency_specialized / auto capacity \u2265 1.00x (latency_specialized serves " \
        "more than the baseline)" in t60
    # 150 tok/s: auto fails at 1 user; latency_specialized met at 1 (185), failed at 4 (137)
    assert "auto below 1 user measured (< 0.50 users per GPU)" in t150
    assert "latency_specialized between 1 and 4 users measured" in t150
    # TTFT 0.1 s: met at 1 user (68 ms), failed at 4 (115 ms) by both arms: ratio unknown
    assert "auto between 1 and 4 users" in t30 and "capacity unknown, either arm" in t30
    assert lines[3] == "Validity: VALID."
    assert lines[4].startswith("Interactivity: latency_specialized vs auto, P90 interactivity")
    assert "at 16 users: 1.78x faster [" in lines[4]
    for line in lines:  # a lower bound is never printed as a value
        assert "at the passing level" not in line
        assert not re.search(r"faster no interval", line)


def test_twin_estimate_is_labelled_modelled_beside_the_measured(sweep: tuple) -> None:
    _, c, _ = sweep
    twin = {"backend": "auto", "replicas": 2, "gpus_per_replica": 4,
            "tiers": [{"tier": "60:2", "bracket": [8, 16], "text": "between 8 and 16 users",
                       "interval": "between 4 and 16 users"}]}
    lines = decide(c, twin).lines()
    assert lines[0].endswith("; twin (backend auto, 2 replicas x 4 GPUs) modelled: "
                             "between 8 and 16 users (1.00 \u2013 2.00 users per GPU), "
                             "prediction interval between 4 and 16 users.")
    assert lines[0].index("measured") < lines[0].index("modelled")
    assert "modelled" not in lines[1]  # no twin record for that tier: nothing modelled


def _decision_items(page: str) -> list[str]:
    block = page[page.index('id="decision-lines"'):]
    block = block[:block.index("</ul>")]
    return [htmllib.unescape(x) for x in re.findall(r"<li>(.*?)</li>", block, re.S)]


def test_compare_stdout_and_report_open_with_the_same_lines(
        sweep: tuple, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """compare's printing reads the stored comparison: the lines on stdout are the
    report's first lines, word for word."""
    from replay.ab import CompareResult
    from replay.cli._compare_out import print_result

    _, c, runs = sweep
    for name, text in report_bundle(c, runs, charts=False).items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    result = CompareResult(out=tmp_path, report=tmp_path / "report.html", verdict=c.verdict,
                           fairness_sentence=c.fairness.sentence, validity=c.validity)
    assert print_result(result) == 0
    out = capsys.readouterr().out.splitlines()
    items = _decision_items((tmp_path / "report.html").read_text(encoding="utf-8"))
    assert items == decide(c).lines()
    assert out[:len(items)] == items


def test_report_command_prints_the_report_s_decision(
        sweep: tuple, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from replay.cli import main

    root, _, _ = sweep
    out = tmp_path / "r" / "report.html"
    assert main(["report", str(root), "--slo", "60:2", "--no-charts", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    items = _decision_items(out.read_text(encoding="utf-8"))
    assert items[0].startswith("[SIMULATED] Capacity at \u2265 60 tok/s/user")
    for line in items:
        assert line in err


def test_search_section_prints_levels_as_numbers_not_floats(tmp_path: Path) -> None:
    import orjson

    from analysis import read_extras

    (tmp_path / "search.json").write_bytes(orjson.dumps({"results": [
        {"arm": "auto", "tier": "t", "answer": "between 3 and 4 users", "bracket": [3.0, 4.0],
         "how": "bracketed", "evidence": []}]}))
    row = read_extras(tmp_path)["search"]["table"]["rows"][0]
    assert row[3] == "met at 3 \u2013 failed at 4"  # was "met at 3.0 - failed at 4.0"


def test_a_bracket_note_stays_with_its_arm() -> None:
    """The bracket's label ('measured', per GPU) follows its words, its note follows by a
    comma: semicolons part the arms, so a note after one reads as its own arm's."""
    from analysis.judge import Bracket
    from analysis.report._decide import ArmCapacity

    b = Bracket(passed=None, failed=16, indeterminate=[4], passed_above=[32])
    text = ArmCapacity(arm="auto", measured=b.text(), per_gpu="< 1.00 users per GPU").text()
    assert text == ("auto below 16 users measured (< 1.00 users per GPU), not monotone: met "
                    "again at 32, indeterminate at 4 (too few requests to tell)")
    assert ";" not in text
    plain = ArmCapacity(arm="ls", measured=Bracket(passed=4, failed=None).text(),
                        per_gpu="\u2265 0.25 users per GPU").text()
    assert plain == "ls at least 4 users measured (\u2265 0.25 users per GPU)"
    unknown = ArmCapacity(arm="a", measured=Bracket(passed=None, failed=None,
                                                    indeterminate=[4]).text(),
                          per_gpu="users per GPU: unknown").text()
    assert unknown == "a capacity unknown, indeterminate at 4 (too few requests to tell)"
