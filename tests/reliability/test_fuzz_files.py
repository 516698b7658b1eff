"""Every file the tool reads, damaged: workloads, imported traces, run directories and
``comparison.json``. Whatever the damage, the command ends with one clear line (or
succeeds when the damage left a valid file), never a traceback."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replay.servers.sim import SimServerProcess, free_port
from tests.reliability.corrupt import corrupt
from tests.support.commands import call as _call
from tests.support.commands import check_clean
from tests.support.fuzz import examples
from tests.support.workloads import make_workload

_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
                 derandomize=True)
_TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
_TRACE_FILES = {
    "weka": _TRACES / "weka" / "trace_0277.json",
    "mooncake": _TRACES / "mooncake" / "conversation_trace.jsonl",
    "tracelab": _TRACES / "tracelab" / "round_trace.jsonl",
    "azure": _TRACES / "azure" / "AzureLLMInferenceTrace_code.csv",
}


@pytest.fixture(scope="module")
def wl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workload(tmp_path_factory.mktemp("fuzzf") / "wl.jsonl", sessions=2, turns=2,
                         output=4, think_s=0.0)


def _head(path: Path, lines: int = 40) -> bytes:
    """The first lines of a trace (a small file keeps each example fast)."""
    with open(path, "rb") as fh:
        return b"".join(fh.readline() for _ in range(lines))


@pytest.mark.sim
@settings(max_examples=examples(80), **_SETTINGS)
@given(data=st.data())
def test_damaged_workload(data: st.DataObject, wl: Path, tmp_path: Path) -> None:
    bad = tmp_path / "wl.jsonl"
    bad.write_bytes(corrupt(data, wl.read_bytes()))
    cmd = data.draw(st.sampled_from(["inspect", "validate", "run"]), label="command")
    if cmd == "run":
        argv = ["run", "--target", f"http://127.0.0.1:{free_port()}", "--workload", str(bad),
                "--duration", "0.2", "--out", str(tmp_path / "run"), "--quiet"]
    else:
        argv = ["traces", cmd, str(bad)]
    code, err = _call(argv)
    check_clean(code, err, argv)


@settings(max_examples=examples(80), **_SETTINGS)
@given(data=st.data())
def test_damaged_trace_import(data: st.DataObject, tmp_path: Path) -> None:
    fmt = data.draw(st.sampled_from(sorted(_TRACE_FILES)), label="format")
    src = _TRACE_FILES[fmt]
    raw = src.read_bytes() if fmt == "weka" else _head(src)
    bad = tmp_path / src.name
    bad.write_bytes(corrupt(data, raw))
    argv = ["traces", "import", "--format", fmt, str(bad), "-o", str(tmp_path / "out.jsonl")]
    code, err = _call(argv)
    check_clean(code, err, argv)


@pytest.fixture(scope="module")
def comparison(tmp_path_factory: pytest.TempPathFactory, wl: Path) -> tuple[Path, list[str]]:
    """A finished two-arm comparison against simulators, and the command that made it
    (rerunning it resumes, so the servers must be up when it is rerun)."""
    out = tmp_path_factory.mktemp("cmp") / "cmp"
    return out, ["--workload", str(wl), "--duration", "0.5", "--drain", "0.5", "--quiet",
                 "--out", str(out)]


@pytest.fixture(scope="module")
def sims(uses_sim: None) -> Iterator[tuple[str, str]]:
    with SimServerProcess("instant", backend="auto", time_scale=1.0) as a, \
            SimServerProcess("instant", backend="latency_specialized", time_scale=1.0) as b:
        yield a.url, b.url


@pytest.mark.slow
@settings(max_examples=examples(15), **_SETTINGS)
@given(data=st.data())
def test_damaged_comparison_state(data: st.DataObject, comparison: tuple[Path, list[str]],
                                  sims: tuple[str, str], tmp_path: Path) -> None:
    """A damaged ``comparison.json``: resuming refuses in one line or redoes the work;
    ``report`` on the directory never needs it."""
    good, args = comparison
    arms = ["--arm", f"auto={sims[0]}", "--arm", f"latency_specialized={sims[1]}"]
    if not (good / "comparison.json").exists():
        code, err = _call(["compare", *arms, *args])
        assert code in (0, 3), err
    work = tmp_path / "cmp"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(good, work)
    state = work / "comparison.json"
    state.write_bytes(corrupt(data, state.read_bytes()))
    out_at = args.index("--out") + 1
    for argv in (["compare", *arms, *args[:out_at], str(work), *args[out_at + 1:]],
                 ["report", str(work), "--no-charts"]):
        code, err = _call(argv)
        check_clean(code, err, argv)
