"""Sorts the suite into tiers by what a test uses, and keeps the unit tier honest.

A test's tier comes from the fixtures it takes (``TIER_FIXTURES``: a simulated or
loopback server, the ``agentreplay`` command in a child process, the real vLLM CPU
server, Ray, a browser) or, for a module that starts its servers inline, from a
module-level ``pytestmark = pytest.mark.<tier>``. A test with no tier is ``unit``;
every other test is also ``integration``, so ``-m unit`` and ``-m "not integration"``
select the same fast set. In the unit tier an autouse guard makes binding a network
socket, listening on one or starting a subprocess fail the test, so a test that
needs a server and forgot its tier fails loudly instead of slowing the unit tier.

CI (``CI=true``) loads the ``ci`` hypothesis profile: fewer examples per property.
"""

from __future__ import annotations

import os
import platform
import signal
import socket
import subprocess
from typing import Any

import pytest
from hypothesis import settings

from tests.support.demo import DemoRun, run_quick_demo
from tests.support.fuzz import CI_MAX_EXAMPLES, in_ci
from tests.support.procs import claim
from tests.support.workers import group_items

TIERS = ("sim", "cli", "vllm", "ray", "browser")


def _terminal_dispositions() -> None:
    """Every child a test starts begins with the signal dispositions a terminal gives it.

    A suite started in the background of a script (``cmd &`` ignores SIGINT) or under
    ``nohup`` (SIGHUP ignored) would hand the ignore to every child it starts, and the
    tests that send those signals would then test the inherited-ignore path, where the
    tool rightly keeps a SIGHUP ignored and a SIGINT ignored until its handlers are in:
    seen as lost signals in three tests of a suite run under ``nohup ... &``.
    tests/reliability/test_signals_inherited.py sets the ignore on purpose for its
    children."""
    for sig, handler in ((signal.SIGINT, signal.default_int_handler),
                         (signal.SIGHUP, signal.SIG_DFL), (signal.SIGTERM, signal.SIG_DFL)):
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, handler)


_terminal_dispositions()


def _font_cache() -> None:
    """matplotlib lists the machine's fonts with ``fc-list`` (a subprocess) the first
    time it runs on a machine, then caches the list. Built here, before the unit tier's
    guard refuses subprocesses, or the first chart test on a fresh machine fails for it
    (the README's test command did: two report tests, on a machine with no
    ~/.cache/matplotlib)."""
    from matplotlib import font_manager

    font_manager.fontManager.get_default_size()


_font_cache()

# The fixtures that make a test one of the slower tiers; a conftest that adds such a
# fixture adds its name here.
# A fixture that starts a server or process requests ``uses_<tier>`` (pytest counts the
# fixtures a fixture requests as the test's), so every test using it gets the tier.
TIER_FIXTURES: dict[str, frozenset[str]] = {
    "sim": frozenset({"uses_sim", "sim_servers", "loopback"}),
    "cli": frozenset({"uses_cli", "cli_run"}),
    "vllm": frozenset({"uses_vllm", "vllm_server", "vllm_py", "tiny_model"}),
    "ray": frozenset({"uses_ray"}),
    "browser": frozenset({"uses_browser"}),
}

# Priming platform's cache: platform.processor() runs ``uname -p`` once per process, and
# the run manifest asks for it; that is not a test starting a process.
platform.processor()

# Launched servers inherit this process's stamp, so process scans keep to their own.
claim()

settings.register_profile("ci", max_examples=CI_MAX_EXAMPLES, deadline=None)
if in_ci():
    settings.load_profile("ci")


def _tiers(item: pytest.Item) -> set[str]:
    names = set(getattr(item, "fixturenames", ()))
    found = {tier for tier, fixtures in TIER_FIXTURES.items() if names & fixtures}
    found |= {m.name for m in item.iter_markers() if m.name in TIERS}
    return found


@pytest.hookimpl(tryfirst=True)  # before xdist's hook reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # AGENTREPLAY_TIER_PROBE=1 puts every test in the unit tier, guard on: the tests
    # that then fail are exactly those that need a tier.
    probe = os.environ.get("AGENTREPLAY_TIER_PROBE") == "1"
    for item in items:
        tiers = set() if probe else _tiers(item)
        if not tiers:
            item.add_marker(pytest.mark.unit)
            continue
        for tier in sorted(tiers):
            if item.get_closest_marker(tier) is None:
                item.add_marker(getattr(pytest.mark, tier))
        item.add_marker(pytest.mark.integration)
    # pytest-xdist (CI's -n): tests sharing an expensive fixture share a worker, and a
    # worker starts the longest groups first (tests/support/workers.py)
    group_items(items, frozenset().union(*TIER_FIXTURES.values()),
                reorder=hasattr(config, "workerinput"))


@pytest.fixture(scope="session")
def uses_sim() -> None:
    """Requested by whatever starts a simulated server or a loopback stub: tier ``sim``."""


@pytest.fixture(scope="session")
def uses_cli() -> None:
    """Requested by whatever runs ``agentreplay`` or another child process: tier ``cli``."""


@pytest.fixture(scope="session")
def uses_vllm() -> None:
    """Requested by whatever starts the real vLLM CPU server: tier ``vllm``."""


@pytest.fixture(scope="session")
def uses_ray() -> None:
    """Requested by whatever starts a Ray cluster: tier ``ray``."""


@pytest.fixture(scope="session")
def uses_browser() -> None:
    """Requested by whatever drives headless chromium: tier ``browser``."""


@pytest.fixture(scope="session")
def quick_demo(uses_cli: None, tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """One ``agentreplay demo --quick`` for the session, read by the end-to-end demo
    test and the browser's check of its report (a minute each time it runs)."""
    return run_quick_demo(tmp_path_factory.mktemp("quick-demo") / "demo")


class TierError(RuntimeError):
    """A unit-tier test tried to serve, listen or start a process."""


class _Guard:
    """Patches socket binding/listening and subprocess starts to refuse, and notes each
    refusal (the code under test may swallow the error; the test fails anyway)."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid
        self.seen: list[str] = []
        self.patch = pytest.MonkeyPatch()

    def refuse(self, what: str) -> TierError:
        self.seen.append(what)
        names = ", ".join(sorted(set().union(*TIER_FIXTURES.values())))
        return TierError(
            f"{self.nodeid} is in the unit tier but {what}; give it a tier fixture "
            f"({names}) or a pytestmark = pytest.mark.sim/cli/vllm/ray/browser"
        )

    def start(self) -> None:
        real_bind = socket.socket.bind
        real_listen = socket.socket.listen
        guard = self

        def bind(self: socket.socket, address: Any) -> None:
            if self.family != socket.AF_UNIX:
                raise guard.refuse(f"bound a socket to {address!r}")
            real_bind(self, address)

        def listen(self: socket.socket, *args: Any) -> None:
            if self.family != socket.AF_UNIX:
                raise guard.refuse("listened on a socket")
            real_listen(self, *args)

        def popen(self: subprocess.Popen[Any], args: Any, *rest: Any, **kw: Any) -> None:
            raise guard.refuse(f"started a subprocess {args!r}")

        self.patch.setattr(socket.socket, "bind", bind)
        self.patch.setattr(socket.socket, "listen", listen)
        self.patch.setattr(subprocess.Popen, "__init__", popen)


_GUARD = pytest.StashKey[_Guard]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Before any fixture of the test is set up, so a module- or session-scoped server
    # fixture used by a unit test is refused too.
    if item.get_closest_marker("unit") is not None:
        guard = _Guard(item.nodeid)
        item.stash[_GUARD] = guard
        guard.start()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    # After the test's own fixtures are torn down.
    guard = item.stash.get(_GUARD, None)
    if guard is not None:
        guard.patch.undo()
        if guard.seen:
            pytest.fail(str(guard.refuse(guard.seen[0])), pytrace=False)
