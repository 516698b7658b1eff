"""CLI polish: help texts, defaults shown, profiles listed, plurals, file modes,
clear refusals and the end-of-run summary (issue 19, Why 7)."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from replay.cli import build_parser, main

_SKIP = (argparse._SubParsersAction, argparse._HelpAction, argparse._VersionAction)


def _parsers(
    parser: argparse.ArgumentParser, name: str = "agentreplay",
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


def _options() -> Iterator[tuple[str, argparse.ArgumentParser, argparse.Action]]:
    for name, parser in _parsers(build_parser()):
        for action in parser._actions:
            if not isinstance(action, _SKIP):
                yield name, parser, action


def test_the_walk_reaches_nested_subcommands() -> None:
    names = {name for name, _ in _parsers(build_parser())}
    assert {"agentreplay run", "agentreplay traces import", "agentreplay serve-sim"} <= names


def test_every_argument_has_help() -> None:
    missing = [f"{name} {action.option_strings or action.dest}"
               for name, _, action in _options() if not (action.help or "").strip()]
    assert missing == []


def test_every_default_is_shown_in_help() -> None:
    hidden = []
    for name, parser, action in _options():
        default = action.default
        if (not action.option_strings or action.nargs == 0
                or default is None or default is argparse.SUPPRESS):
            continue
        text = parser._get_formatter()._expand_help(action)
        if str(default) not in text:
            hidden.append(f"{name} {action.option_strings[-1]}: {text!r}")
    assert hidden == []


@pytest.mark.parametrize("flag, shown", [
    ("--warmup", "0.0"), ("--users", "1"), ("--metrics-interval", "2.0"),
    ("--drain", "long enough for the workload's longest answer: its output tokens at 20 tok/s "
                "+ 10 s, at least 30 s, said when the run starts;"),
])
def test_run_help_shows_the_defaults(
    flag: str, shown: str, capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    options = " ".join(capsys.readouterr().out.split("options:", 1)[1].split())
    after = re.split(rf"(?:^| ){flag} [A-Z_]+ ", options, maxsplit=1)[1]
    shown = shown if shown.endswith(";") else shown + ")"
    assert f"(default: {shown}" in after.split(" --", 1)[0]


def test_serve_sim_help_lists_every_bundled_profile(capsys: pytest.CaptureFixture[str]) -> None:
    from replay.servers.sim import list_profiles

    with pytest.raises(SystemExit):
        main(["serve-sim", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert list_profiles()
    for name in list_profiles():
        assert name in out


def test_plural_agrees_with_the_count() -> None:
    from analysis.text import plural

    assert [plural(n, "session") for n in (0, 1, 2)] == ["0 sessions", "1 session", "2 sessions"]
    assert plural(1, "query", "queries") == "1 query"
    assert plural(3, "query", "queries") == "3 queries"


def test_generate_one_session_says_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "w.jsonl"
    assert main(["traces", "generate", "--profile", "decode", "--sessions", "1",
                 "-o", str(out)]) == 0
    assert f"wrote 1 session to {out}" in capsys.readouterr().out
    assert main(["traces", "validate", str(out)]) == 0
    assert "(1 session," in capsys.readouterr().out


def test_search_answer_of_one_user_says_user() -> None:
    from analysis import Bracket, SloTier
    from replay.ab import SearchAnswer

    answer = SearchAnswer("auto", SloTier(floor_tok_s=30, ttft_s=15),
                          bracket=Bracket(passed=1, failed=2), ended="bracketed",
                          how="bracketed to one user")
    assert ": between 1 and 2 users (bracketed to one user)" in answer.text()
    answer.bracket = Bracket(passed=1, failed=None)
    assert ": at least 1 user (" in answer.text()


_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"


@pytest.mark.parametrize("fmt", ["mooncake", "azure", "tracelab"])
def test_import_of_a_folder_says_it_expects_a_file(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["traces", "import", "--format", fmt, str(tmp_path), "-o",
                 str(tmp_path / "w.jsonl")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "is a folder" in err and "one trace file" in err and "weka" in err
    assert "no such file" not in err and not (tmp_path / "w.jsonl").exists()


@pytest.mark.parametrize("fmt, file", [
    ("weka", "weka/trace_0032.json"), ("mooncake", "mooncake/conversation_trace.jsonl"),
    ("tracelab", "tracelab/round_trace.jsonl"), ("azure", "azure/AzureLLMInferenceTrace_code.csv"),
])
@pytest.mark.parametrize("action", ["inspect", "validate"])
def test_a_raw_trace_where_a_workload_belongs_names_the_import(
    action: str, fmt: str, file: str, capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["traces", action, str(_FIXTURES / file)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert f"agentreplay traces import --format {fmt} " in err


def test_the_suggested_import_works(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from traces import sniff_trace_format

    raw = _FIXTURES / "weka" / "trace_0032.json"
    out = tmp_path / "w.jsonl"
    assert main(["traces", "import", "--format", "weka", str(raw), "-o", str(out)]) == 0
    assert sniff_trace_format(out) is None  # a workload is not mistaken for a raw trace
    capsys.readouterr()
    assert main(["traces", "inspect", str(out)]) == 0


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_workload_files_follow_the_umask(tmp_path: Path, umask: int, mode: int) -> None:
    import stat

    out = tmp_path / "w.jsonl"
    old = os.umask(umask)
    try:
        assert main(["traces", "generate", "--profile", "decode", "--sessions", "1",
                     "-o", str(out)]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == mode
    assert [p.name for p in tmp_path.iterdir()] == ["w.jsonl"]  # no temp file left


def test_launch_dry_run_needs_no_vllm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no `vllm` to find
    assert main(["launch", "--model", "m", "--arm", "auto", "--arm", "latency_specialized",
                 "--dry-run"]) == 0
    got = capsys.readouterr()
    commands = [ln for ln in got.out.splitlines() if not ln.startswith("#")]
    assert len(commands) == 2
    assert all(" vllm serve m " in ln for ln in commands)
    assert "no `vllm` on PATH" in got.err  # said, not fatal
    # without --dry-run the missing vLLM is still an error
    assert main(["launch", "--model", "m", "--arm", "auto"]) == 2


@pytest.mark.parametrize("extra, need", [
    (["--tensor-parallel-size", "16"], 16), (["-tp=4", "--pipeline-parallel-size", "4"], 16),
    (["--tensor-parallel-size=2", "-pp", "8"], 16),
])
@pytest.mark.parametrize("mode", ["side-by-side", "sequential"])
def test_launch_refuses_parallelism_beyond_gpus_per_arm(
    extra: list[str], need: int, mode: str, capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["launch", "--model", "m", "--arm", "a", "--arm", "b", "--mode", mode,
                 "--gpus-per-arm", "8", "--dry-run", "--", *extra])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "--gpus-per-arm 8" in err and f"needs {need} GPUs per arm" in err


def test_launch_accepts_parallelism_that_fits(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["launch", "--model", "m", "--arm", "a", "--arm", "b", "--mode", "side-by-side",
                 "--gpus-per-arm", "8", "--dry-run", "--", "-tp", "4", "-pp", "2"]) == 0
    out = capsys.readouterr().out
    assert "CUDA_VISIBLE_DEVICES=8,9,10,11,12,13,14,15 " in out


def test_run_summary_counts_outcomes_and_reads_the_percentiles(tmp_path: Path) -> None:
    from analysis import measure, read_run, summarize
    from replay.cli._run_summary import run_summary_lines
    from tests.analysis.builders import make_run, rec

    # every ok request: TTFT 1 s, 10 tokens over 1 s after the first (TPOT 1/9 s)
    records = [rec(i, user=i % 2, lane=str(i % 2)) for i in range(8)]
    records.append(rec(8, status="error", error_kind="http_500", first_token_s=None,
                       last_token_s=None, output_tokens=0))
    records.append(rec(9, status="timeout", error_kind="ttft_timeout", output_tokens=0,
                       first_token_s=None, last_token_s=None))
    out = make_run(tmp_path / "run one", records, simulated=True)
    truth = summarize(measure(read_run(out)), bootstrap=False)
    assert truth.counts.ok == 8 and truth.ttft_due.p90 is not None  # the fixture is what we think
    head, hint = run_summary_lines(out)
    assert head.startswith("[SIMULATED] window: 10 requests (8 ok, 1 error, 1 timeout)")
    # the TTFT the tiers and charts use, named, in ms
    assert f"P90 TTFT from schedule {truth.ttft_due.p90 * 1000:,.0f} ms" in head
    assert f"P90 interactivity {truth.interactivity.p90:.3g} tok/s/user" in head
    assert hint == f"full report: agentreplay report '{out}'"


def test_run_summary_of_an_empty_window_says_na(tmp_path: Path) -> None:
    from replay.cli._run_summary import run_summary_lines
    from tests.analysis.builders import make_run, rec

    out = make_run(tmp_path / "r", [rec(0, sent_s=200.0)])  # after the window
    head, _ = run_summary_lines(out)
    assert head.startswith("window: 0 requests (0 ok)")
    assert "P90 interactivity n/a; P90 TTFT from schedule n/a" in head


@pytest.fixture(scope="module")
def agent_workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("agent") / "w.jsonl"
    assert main(["traces", "generate", "--sessions", "6", "--max-context", "32768",
                 "-o", str(out)]) == 0
    return out


def _rule(workload: Path, think_scale: float = 1.0, cap: float | None = None) -> int:
    """The stated rule, from the workload's own statistics."""
    import math

    from traces import inspect_sessions, iter_sessions

    stats = inspect_sessions(iter_sessions(workload))
    assert stats.reuse_share is not None and stats.reuse_share >= 0.5  # prefix-heavy
    think = (stats.think_time_s.p50 or 0.0) * think_scale
    think = min(think, cap) if cap is not None else think
    return math.ceil(think + (stats.output_tokens.p50 or 0.0) / 30.0)


def test_warmup_warning_names_the_flag_and_the_rule(agent_workload: Path) -> None:
    from replay.cli._warmup import warmup_advice

    needed = _rule(agent_workload)
    assert needed > 1
    advice = warmup_advice(agent_workload, 0.0)
    assert advice is not None
    assert "--warmup 0 s" in advice and f"suggested: --warmup {needed} " in advice
    assert "think-time median" in advice and "30 tok/s/user" in advice
    assert warmup_advice(agent_workload, needed - 0.5) is not None
    assert warmup_advice(agent_workload, float(needed)) is None
    capped = _rule(agent_workload, cap=0.0)
    assert f"--warmup {capped} " in (warmup_advice(agent_workload, 0.0, think_time_cap_s=0.0) or "")


def test_no_warmup_warning_without_prefix_reuse(tmp_path: Path) -> None:
    from replay.cli._warmup import warmup_advice

    out = tmp_path / "d.jsonl"
    assert main(["traces", "generate", "--profile", "decode", "--sessions", "4",
                 "-o", str(out)]) == 0
    assert warmup_advice(out, 0.0) is None


def test_a_refused_run_fails_in_one_line_without_the_warmup_warning(
    agent_workload: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    capsys.readouterr()
    # port 9 (discard) on loopback: nothing answers, so the run is refused
    assert main(["run", "--target", "http://127.0.0.1:9", "--workload", str(agent_workload),
                 "--duration", "1", "--out", str(tmp_path / "r"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--warmup" not in err


def _failing_run(root: Path) -> Path:
    """A run whose window has 6% failed requests (24 errors of 400: enough requests that
    the 94% that met the tiers is told apart from 90%, not indeterminate)."""
    from tests.analysis.builders import make_run, synth_records

    return make_run(root, synth_records(users=8, per_user=50, tpot=0.01, ttft=0.5,
                                        errors=24, start=11.0))


@pytest.mark.parametrize("share", [None, 0.2, 0.01])
def test_report_judges_tiers_by_max_failure_share(
    share: float | None, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    import orjson

    from analysis import DEFAULT_MAX_FAILURE_SHARE, Rules, compare_runs, read_runs

    run = _failing_run(tmp_path / "r")
    flags = [] if share is None else ["--max-failure-share", str(share)]
    assert main(["report", str(run), "--no-charts", *flags]) == 0
    summary = orjson.loads((run / "summary.json").read_bytes())
    want = DEFAULT_MAX_FAILURE_SHARE if share is None else share
    assert summary["rules"]["max_failure_share"] == want
    truth = compare_runs(read_runs([run]), rules=Rules(max_failure_share=want))
    assert [row["bracket"] for row in summary["capacity"]] == [
        r.bracket.model_dump(mode="json") for r in truth.capacity]
    met = [row["bracket"]["passed"] for row in summary["capacity"]
           if row["bracket"]["passed"] is not None]
    assert bool(met) == (want >= 0.06)  # 6% failures fail every tier below that


@pytest.mark.parametrize("command", ["report", "plan", "compare"])
@pytest.mark.parametrize("bad", ["1.5", "-0.1", "nan"])
def test_max_failure_share_outside_0_1_is_refused(
    command: str, bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    run = _failing_run(tmp_path / "r")
    if command == "compare":
        argv = ["compare", "--arm", "a=http://127.0.0.1:9", "--arm", "b=http://127.0.0.1:9",
                "--workload", str(run / "requests.jsonl"), "--duration", "1",
                "--out", str(tmp_path / "c")]
    else:
        argv = [command, str(run)]
    assert main([*argv, f"--max-failure-share={bad}"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--max-failure-share" in err
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize(("flag", "bad", "shown"), [
    ("--duration", "1e12", "--duration: must be <= 2592000"),
    ("--warmup", "1e9", "--warmup: must be <= 2592000"),
    ("--think-scale", "1e9", "--think-scale: must be <= 1000000"),
    ("--time-scale", "1e-9", "--time-scale: must be >= 0.000001"),
    ("--itl-timeout", "1e9", "--itl-timeout: must be <= 2592000"),
])
def test_run_and_compare_refuse_the_same_out_of_range_value(
    flag: str, bad: str, shown: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """One bound per shared knob (``replay.load`` types): a value ``run`` refuses,
    ``compare`` refuses at once with the same words, before any server is asked."""
    run = _failing_run(tmp_path / "r")
    wl = str(run / "requests.jsonl")
    base = {"--workload": wl, "--duration": "1", flag: bad}
    tail = [x for kv in base.items() for x in kv]
    for argv in (["run", "--target", "http://127.0.0.1:9", "--out", str(tmp_path / "o"),
                  *tail],
                 ["compare", "--arm", "a=http://127.0.0.1:9", "--arm", "b=http://127.0.0.1:9",
                  "--out", str(tmp_path / "c"), *tail]):
        assert main(argv) == 2, argv[0]
        err = capsys.readouterr().err
        assert shown in err and len(err.strip().splitlines()) == 1, (argv[0], err)
    assert not (tmp_path / "c").exists() and not (tmp_path / "o").exists()


def test_compare_carries_max_failure_share_into_the_rules() -> None:
    from replay.ab import CompareOptions

    opts = CompareOptions(duration_s=1, max_failure_share=0.25)
    assert opts.rules().max_failure_share == 0.25


def test_live_view_uses_the_reports_latencies() -> None:
    import numpy as np

    from analysis import RequestRecord, record_latencies
    from replay.load import LiveStats
    from tests.analysis.builders import synth_records

    records = synth_records(users=3, per_user=6, tpot=0.02, ttft=0.4, errors=2)
    records[-1].update(status="incomplete", last_token_s=records[-1]["first_token_s"] + 0.5,
                       output_tokens=7)  # cut at the drain: decoded 7 tokens so far
    full = [RequestRecord.model_validate({**r, "phase": "measure"}).model_dump()
            for r in records]
    live = LiveStats(total_s=10.0)
    for rec in full:
        live.on_record(rec)
    lat = [record_latencies(r) for r in full]  # type: ignore[arg-type]
    ttft = [x.ttft for r, x in zip(full, lat, strict=True)
            if r["status"] == "ok" and x.ttft is not None]
    tpot = [x.tpot for r, x in zip(full, lat, strict=True)
            if r["status"] in ("ok", "incomplete") and x.tpot is not None]
    snap = live.snapshot()
    assert snap["ttft_p90"] == pytest.approx(float(np.percentile(ttft, 90)))
    assert snap["inter_p90"] == pytest.approx(1.0 / float(np.percentile(tpot, 90)))
    assert len(tpot) == 3 * 6 - 2  # the incomplete request's decode counts, errors do not


def test_the_drain_help_states_the_load_default(capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI's help text and ``replay.load``'s default drain use the same numbers."""
    from replay.load import DRAIN_MARGIN_S, DRAIN_MIN_S, DRAIN_RATE_TOK_S

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert (f"at {DRAIN_RATE_TOK_S:g} tok/s + {DRAIN_MARGIN_S:g} s, at least "
            f"{DRAIN_MIN_S:g} s") in text
