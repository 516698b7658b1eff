"""Bad input: random CLI option values and corrupted result files end with exit 0 or 2
and a clean message, never a traceback."""

from __future__ import annotations

import contextlib
import io
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replay.cli import main
from replay.servers.sim import SimServerProcess, free_port
from tests.reliability.corrupt import corrupt
from tests.support.commands import ERROR_LINE
from tests.support.fuzz import examples
from tests.support.workloads import make_workload

_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
                 derandomize=True)


def _call(argv: list[str]) -> tuple[int, str, str]:
    """``main(argv)`` with stdout/stderr captured; argparse's exit becomes a code."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def _clean(code: int, err: str, argv: list[str]) -> None:
    assert code in (0, 2, 3), (code, argv, err)  # 3: a run stamped invalid
    assert "Traceback" not in err, (argv, err)
    if code == 2 and "usage:" not in err:  # our own user errors: one message (notes aside)
        errors = [ln for ln in err.splitlines() if ERROR_LINE.match(ln)]
        assert len(errors) == 1, (argv, err)


_numbers = st.one_of(
    st.integers(-(10**12), 10**12).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["", "-0", "1e309", "0x10", "nan", "-inf", "inf", "1_000", " 3 "]),
    st.text(max_size=6),
)
_short = st.floats(min_value=0.01, max_value=0.3).map(repr)
_not_url = st.text(max_size=20).filter(
    lambda s: not s.strip().lower().startswith(("http:", "https:")))
_RUN_NUMERIC = ["--users", "--duration", "--warmup", "--drain", "--seed", "--vocab-size",
                "--server-block-size", "--think-time-cap", "--think-scale", "--rate",
                "--metrics-interval"]


@pytest.fixture(scope="module")
def wl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workload(tmp_path_factory.mktemp("fuzz") / "wl.jsonl", sessions=2, turns=2,
                         output=4, think_s=0.0)


@pytest.mark.sim
@settings(max_examples=examples(150), **_SETTINGS)
@given(data=st.data())
def test_run_options_against_a_refusing_port(data: st.DataObject, wl: Path,
                                             tmp_path: Path) -> None:
    port = free_port()
    target = data.draw(st.one_of(
        st.just(f"http://127.0.0.1:{port}"),
        st.text(max_size=12).map(lambda s, p=port: f"http://127.0.0.1:{p}/{s}"),
        st.text(max_size=8).map(lambda s, p=port: f"http://{s}@127.0.0.1:{p}"),
        _not_url,
    ), label="target")
    argv = ["run", "--target", target, "--workload",
            data.draw(st.one_of(st.just(str(wl)), st.text(max_size=10)), label="workload"),
            "--out", str(tmp_path / "run"), "--quiet"]
    picked = data.draw(st.lists(st.sampled_from(_RUN_NUMERIC), unique=True, max_size=4))
    if "--duration" not in picked:
        argv += ["--duration", "0.2"]
    for opt in picked:
        argv.append(f"{opt}={data.draw(_numbers, label=opt)}")
    if data.draw(st.booleans()):
        argv += ["--api-key-env", data.draw(st.text(max_size=6), label="key env")]
    if data.draw(st.booleans()):
        argv += ["--model", data.draw(st.text(max_size=6), label="model")]
    code, _, err = _call(argv)
    _clean(code, err, argv)
    assert code == 2  # nothing listens there, or an option is bad


@pytest.fixture(scope="module")
def sim(uses_sim: None) -> Iterator[str]:
    with SimServerProcess("instant", time_scale=1.0) as srv:
        yield srv.url


# short valid values, or invalid ones (never a long valid one: the run would last that long)
_bad_or_short = st.one_of(_short, _short, st.sampled_from(["inf", "1e309", "-inf", "nan"]),
                          _numbers.filter(lambda s: not _is_float(s) or not float(s) > 0))


def _is_float(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


@pytest.mark.sim
@pytest.mark.slow
@settings(max_examples=examples(25), **_SETTINGS)
@given(data=st.data())
def test_run_options_against_a_live_sim(data: st.DataObject, wl: Path, sim: str,
                                        tmp_path: Path) -> None:
    """Options that pass validation reach a real (short) run; the rest exit 2."""
    out = tmp_path / "run"
    shutil.rmtree(out, ignore_errors=True)
    argv = ["run", "--target", sim, "--workload", str(wl), "--out", str(out), "--quiet",
            "--duration=" + data.draw(_bad_or_short, label="duration"),
            "--warmup=" + data.draw(st.one_of(st.just("0"), _bad_or_short), label="warmup"),
            "--drain=" + data.draw(st.one_of(st.just("0.2"), _bad_or_short), label="drain")]
    for opt in data.draw(st.lists(st.sampled_from(
            ["--users", "--seed", "--think-time-cap", "--think-scale", "--vocab-size",
             "--metrics-interval"]), unique=True, max_size=3)):
        # small numbers, or values no option accepts (a large valid user count would
        # really start that many users)
        value = data.draw(st.one_of(st.integers(-3, 40).map(str), _short,
                                    st.sampled_from(["inf", "nan", "1e309", "-1", "x"]),
                                    st.text(max_size=4)), label=opt)
        argv.append(f"{opt}={value}")
    code, _, err = _call(argv)
    _clean(code, err, argv)


@pytest.fixture(scope="module")
def good_run(uses_sim: None, tmp_path_factory: pytest.TempPathFactory, wl: Path) -> Path:
    out = tmp_path_factory.mktemp("good") / "run"
    with SimServerProcess("small", time_scale=4.0) as srv:
        code, _, err = _call(["run", "--target", srv.url, "--workload", str(wl), "--users", "2",
                              "--duration", "1", "--out", str(out), "--quiet",
                              "--metrics-interval", "0.3"])
    assert code in (0, 3), err  # 3: stamped invalid (a starved simulator, say)
    return out


@settings(max_examples=examples(60), **_SETTINGS)
@given(data=st.data())
def test_report_options(data: st.DataObject, good_run: Path, tmp_path: Path) -> None:
    argv = ["report", str(good_run), "--no-charts", "-o", str(tmp_path / "r.html")]
    for _ in range(data.draw(st.integers(0, 2))):
        argv += ["--slo", data.draw(st.one_of(st.text(max_size=10), st.tuples(
            _numbers, _numbers).map(lambda t: f"{t[0]}:{t[1]}")), label="slo")]
    if data.draw(st.booleans()):
        argv += ["--baseline", data.draw(st.text(max_size=8), label="baseline")]
    if data.draw(st.booleans()):
        argv += ["--seed", data.draw(_numbers, label="seed")]
    code, _, err = _call(argv)
    _clean(code, err, argv)


@settings(max_examples=examples(120), **_SETTINGS)
@given(data=st.data())
def test_corrupted_result_files(data: st.DataObject, good_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.rmtree(run, ignore_errors=True)
    shutil.copytree(good_run, run, ignore=shutil.ignore_patterns("report.html", "summary.json",
                                                                 "requests.csv"))
    name = data.draw(st.sampled_from(["requests.jsonl", "run.json", "server_metrics.jsonl"]))
    path = run / name
    path.write_bytes(corrupt(data, path.read_bytes()))
    argv = ["report", str(run), "--no-charts"]
    code, _, err = _call(argv)
    _clean(code, err, [name])
    if code == 2:
        assert name in err or "run.json" in err or "no run" in err, err
