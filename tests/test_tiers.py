"""The tiers of tests/conftest.py: a test's tier comes from what it uses, and the unit
tier's guard fails a test that serves, listens or starts a process (even when the code
under test swallows the error)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest_plugins = ["pytester"]

CONFTEST = (Path(__file__).parent / "conftest.py").read_text()

INNER = '''
import socket, subprocess, sys
import pytest

@pytest.fixture(scope="module")
def server(uses_sim):
    return "started"

def test_binds_and_swallows():
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", 0))
        except Exception:
            pass

def test_spawns():
    subprocess.run([sys.executable, "-c", "pass"], check=False)

def test_pure():
    assert sum([1, 2]) == 3

def test_unix_socketpair_is_fine():
    a, b = socket.socketpair()
    a.close()
    b.close()

@pytest.mark.sim
def test_marked_may_bind():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))

def test_fixture_gives_the_tier(server):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
'''


@pytest.mark.cli  # a whole pytest session (which may start git), and outside the guard
def test_the_guard_and_the_tiers(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rA",
                                          "-W", "ignore::pytest.PytestUnknownMarkWarning")
    out = result.stdout.str()
    # the swallowed bind still fails the test (at teardown), naming it and what it did
    assert "ERROR at teardown of test_binds_and_swallows" in out
    assert "test_binds_and_swallows is in the unit tier but bound a socket to " in out
    assert "FAILED test_inner.py::test_spawns" in out
    assert "test_spawns is in the unit tier but started a subprocess" in out
    for name in ("test_pure", "test_unix_socketpair_is_fine", "test_marked_may_bind",
                 "test_fixture_gives_the_tier"):
        assert f"PASSED test_inner.py::{name}" in out
    # -m unit and -m integration are complements, by the mark or the fixture requested
    unit = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-m", "unit", "--co", "-q",
                                        "-W", "ignore::pytest.PytestUnknownMarkWarning")
    chosen = {line.split("::")[1] for line in unit.stdout.lines if "::" in line}
    assert chosen == {"test_binds_and_swallows", "test_spawns", "test_pure",
                      "test_unix_socketpair_is_fine"}


CHART = '''
import io

def test_draws_a_chart_with_text():
    import matplotlib  # inside the test, as the report imports it: under the guard
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4])
    ax.set_title("P90 interactivity")
    fig.savefig(io.BytesIO(), format="png")
'''


@pytest.mark.cli  # a pytest session in a child process
def test_a_unit_chart_test_passes_on_a_machine_with_no_font_cache(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """matplotlib's first run on a machine lists its fonts with a subprocess, which the
    unit tier refuses: the conftest builds the cache first (an empty MPLCONFIGDIR is a
    fresh machine's)."""
    cache = tmp_path / "mpl"
    monkeypatch.setenv("MPLCONFIGDIR", str(cache))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_chart=CHART)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-m", "unit", "-rA")
    assert "PASSED test_chart.py::test_draws_a_chart_with_text" in result.stdout.str()
    result.assert_outcomes(passed=1)
    assert list(cache.glob("fontlist-*.json")), "the font cache was not built"
