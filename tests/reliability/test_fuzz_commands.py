"""Every subcommand's flags, fuzzed: whatever the values, the command ends with exit 0
or a user error (one line, or argparse's usage), never a traceback or a hang.

The flags are read from the parser itself, so a flag added later is fuzzed too.
Each command starts from arguments that end quickly whatever else is valid: a
target port nobody listens on, a port already taken for ``serve-sim``,
``--dry-run`` for ``launch``, an output path that is a file for ``demo``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replay.servers.sim import free_port
from tests.support.commands import call as _call
from tests.support.commands import check_clean, commands
from tests.support.fuzz import examples as fuzz_examples
from tests.support.workloads import make_workload

pytestmark = pytest.mark.sim

_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
                 derandomize=True)


_garbage = st.one_of(st.sampled_from(["", "x", "0x10", "1_0", " 3 ", "1.5", "-"]),
                    st.text(max_size=6))
# never a valid but large count: that would be real work (a million sessions), not a
# refusal; ports get the out-of-range values
_ints = st.one_of(
    st.integers(-3, 40).map(str),
    st.sampled_from(["0", "-1", str(2**63), str(2**80), str(-(2**80))]),
    _garbage,
)
_ports = st.one_of(_ints, st.sampled_from(["65536", "99999", str(10**12)]))
_floats = st.one_of(
    st.floats(-3, 40).map(repr),
    st.sampled_from(["0", "-0", "-1", "1e309", "-1e309", "nan", "inf", "-inf", "1e-300",
                     "1e300", "5e-324"]),
    _garbage,
)
_text = st.one_of(st.text(max_size=8), st.sampled_from(
    ["", "-", "--", "=", "a=b", "a/b=c", "../x", "\x00", "é", "http://", "http://h:99999",
     "http://127.0.0.1:1/", "ftp://x", "a=http://h:99999"]))
_PATHY = ("out", "output", "workload", "path", "file", "paths", "log_dir", "truth",
          "faults", "profile", "model", "vllm_python")


def _paths(tmp: Path) -> st.SearchStrategy[str]:
    a_file = tmp / "a_file.txt"
    a_file.write_text("not a directory\n")
    a_dir = tmp / "a_dir"
    a_dir.mkdir(exist_ok=True)
    return st.one_of(st.sampled_from([
        str(a_file), str(a_dir), "/dev/null", "/dev/null/x", "/proc/nope/x", "",
        str(a_file / "below"), str(tmp / "new" / "deep" / "x"), "/", ".",
    ]), st.text(max_size=6))


def _value(action: argparse.Action, tmp: Path) -> st.SearchStrategy[str]:
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return st.one_of(st.sampled_from(sorted(str(c) for c in action.choices)), _text)
    if action.type is int:
        return _ports if "port" in action.dest else _ints
    if action.type is float:
        return _floats
    if action.dest in _PATHY or action.type is Path:
        return _paths(tmp)
    return _text


@contextlib.contextmanager
def _taken_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        yield s.getsockname()[1]


def _bases(tmp: Path, wl: Path, taken: int) -> dict[str, list[str]]:
    """Arguments that make each command end quickly when everything else is valid."""
    dead = f"http://127.0.0.1:{free_port()}"
    trace = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "weka" / \
        "trace_0277.json"
    model = tmp / "model"
    model.mkdir(exist_ok=True)
    (tmp / "a_file.txt").write_text("not a directory\n")
    return {
        "run": ["--target", dead, "--workload", str(wl), "--duration", "0.2",
                "--out", str(tmp / "run"), "--quiet"],
        "compare": ["--arm", f"a={dead}", "--arm", f"b={dead}", "--allow-identical",
                    "--workload", str(wl),
                    "--duration", "0.2", "--out", str(tmp / "cmp"), "--quiet"],
        "demo": ["--out", str(tmp / "a_file.txt"), "--quick", "--quiet"],
        "serve-sim": ["--port", str(taken), "--host", "127.0.0.1"],
        "launch": ["--model", str(model), "--arm", "auto", "--dry-run",
                   "--log-dir", str(tmp / "logs")],
        "report": [str(tmp / "no-such-run"), "--no-charts", "-o", str(tmp / "r.html")],
        "plan": [str(tmp / "no-such-run")],
        "calibrate": [str(tmp / "no-such-run"), "-o", str(tmp / "twin.json")],
        "traces generate": ["--sessions", "2", "-o", str(tmp / "gen.jsonl")],
        "traces import": ["--format", "weka", str(trace), "-o", str(tmp / "imp.jsonl")],
        "traces inspect": [str(wl)],
        "traces validate": [str(wl)],
    }


# options whose valid values would start long work (a real server, a long run)
_NEVER_VALID: dict[str, set[str]] = {
    "serve-sim": {"--port", "--host"},
    "demo": {"--out"},
    "launch": {"--dry-run"},
}


@pytest.fixture(scope="module")
def wl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workload(tmp_path_factory.mktemp("fuzzc") / "wl.jsonl", sessions=2, turns=2,
                         output=4, think_s=0.0)


def test_every_command_has_a_base() -> None:
    """A new subcommand must be added here (and so get fuzzed)."""
    assert set(commands()) == set(_bases(Path("/tmp"), Path("/tmp/x"), 1))


def _argv(data: st.DataObject, name: str, parser: argparse.ArgumentParser, base: list[str],
          tmp: Path) -> list[str]:
    options = [a for a in parser._actions if a.option_strings and a.dest != "help"
               and not (set(a.option_strings) & _NEVER_VALID.get(name, set()))]
    picked = data.draw(st.lists(st.sampled_from(options), unique_by=id, max_size=4),
                       label="options") if options else []
    argv = name.split() + list(base)
    for action in picked:
        flag = action.option_strings[-1]
        if action.nargs == 0:
            argv.append(flag)
            continue
        value = data.draw(_value(action, tmp), label=flag)
        if flag in argv and action.nargs is None and not isinstance(
                action, argparse._AppendAction):
            argv[argv.index(flag) + 1] = value  # replace the base value
        else:
            argv.append(f"{flag}={value}")
    return argv


def _fuzz(name: str, examples: int = 40) -> Callable[..., None]:
    @settings(max_examples=fuzz_examples(examples), **_SETTINGS)
    @given(data=st.data())
    def test(data: st.DataObject, wl: Path, tmp_path: Path) -> None:
        with _taken_port() as taken, contextlib.chdir(tmp_path):  # relative paths land here
            parser = commands()[name]
            argv = _argv(data, name, parser, _bases(tmp_path, wl, taken)[name], tmp_path)
            code, err = _call(argv)
        check_clean(code, err, argv)
        # a device named as an output is written to, never replaced by a file
        assert stat.S_ISCHR(os.stat("/dev/null").st_mode), argv
    return test


test_fuzz_run = _fuzz("run")
test_fuzz_compare = _fuzz("compare")
test_fuzz_demo = _fuzz("demo", examples=6)  # three switches: few combinations
test_fuzz_serve_sim = _fuzz("serve-sim")
test_fuzz_launch = _fuzz("launch")
test_fuzz_report = _fuzz("report")
test_fuzz_plan = _fuzz("plan")
test_fuzz_calibrate = _fuzz("calibrate")
test_fuzz_traces_generate = _fuzz("traces generate")
test_fuzz_traces_import = _fuzz("traces import")
test_fuzz_traces_inspect = _fuzz("traces inspect")
test_fuzz_traces_validate = _fuzz("traces validate")
