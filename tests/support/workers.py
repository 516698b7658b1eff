"""Which tests share a pytest-xdist worker, and which start first (CI's ``-n`` run).

pytest-xdist builds a module- or session-scoped fixture once per worker that runs a
test using it, so tests that share an expensive fixture must run on one worker
(``--dist loadgroup`` keeps an ``xdist_group`` together): a module's tests that share
one of its module fixtures (a simulated server, a run, a fitted twin); the tests that
share a session fixture starting a server or a child process (the quick demo run);
and every real-vLLM test (one session server, one tiny model written to a shared
cache, and a vLLM server takes the 2 cores while it starts: never two at once); every
Ray test (one cluster at a time). Tests that share one such fixture with another are
joined (union-find), so no fixture is ever built twice. Everything else is spread
test by test.

A test that looks at every process on the machine (``psutil.process_iter``: "no
launched server outlived the signal") keeps to the servers its own worker launched
(tests/support/procs.py: an inherited owner stamp), so it runs in parallel too.

Order: a worker that starts the longest group last ends the run late, so on a worker
the groups come first, the longest kinds first (real vLLM, Ray, then the other
groups, then tests marked ``slow``), the rest in collection order. Every worker sorts
the same way, so their collections stay identical, as xdist requires.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
WHOLE_TIER_GROUPS = ("vllm", "ray")
"""Tiers whose tests all run on one worker."""
_WIDE = ("session", "package")
_NARROW = ("module", "class")


def _defined_in_tests(fixturedef: pytest.FixtureDef[object]) -> bool:
    try:
        return Path(inspect.getfile(fixturedef.func)).resolve().is_relative_to(TESTS)
    except (TypeError, OSError):
        return False


def _keys(item: pytest.Item, tier_fixtures: frozenset[str]) -> list[str]:
    """The shared things this test needs on its worker (empty: it can run anywhere)."""
    keys = [f"tier:{t}" for t in WHOLE_TIER_GROUPS if item.get_closest_marker(t)]
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return keys
    module = item.nodeid.split("::")[0]
    for name in item.fixturenames:
        defs = info.name2fixturedefs.get(name)
        if not defs or name.startswith("uses_"):
            continue
        fixturedef = defs[-1]
        if fixturedef.scope == "function" or not _defined_in_tests(fixturedef):
            continue
        if fixturedef.scope in _NARROW:
            keys.append(f"module:{module}")
        elif fixturedef.scope in _WIDE and (
            set(fixturedef.argnames) & tier_fixtures or name in tier_fixtures
        ):
            # a session fixture that starts something (a cheap one, say a workload file
            # written once, is simply made again on each worker)
            keys.append(f"fixture:{name}")
    return keys


def _rank(group: str | None, item: pytest.Item) -> int:
    if group is not None:
        for n, tier in enumerate(WHOLE_TIER_GROUPS):
            if group == f"tier:{tier}":
                return n
        return len(WHOLE_TIER_GROUPS)
    if item.get_closest_marker("slow") is not None:
        return len(WHOLE_TIER_GROUPS) + 1
    return len(WHOLE_TIER_GROUPS) + 2


def group_items(items: list[pytest.Item], tier_fixtures: frozenset[str],
                *, reorder: bool) -> dict[str, str]:
    """Marks each test that must share a worker with ``xdist_group(name)``; with
    ``reorder``, sorts ``items`` in place, groups and slow kinds first. Returns the
    group of each grouped test's node id."""
    parent: dict[str, str] = {}

    def find(key: str) -> str:
        parent.setdefault(key, key)
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    keyed = [(item, _keys(item, tier_fixtures)) for item in items]
    for _item, keys in keyed:
        for other in keys[1:]:
            a, b = find(keys[0]), find(other)
            if a != b:
                # the whole-tier group names the union, so it is recognisable
                parent[b if a.startswith("tier:") else a] = a if a.startswith("tier:") else b
    groups: dict[str, str] = {}
    for item, keys in keyed:
        if keys:
            groups[item.nodeid] = find(keys[0])
            item.add_marker(pytest.mark.xdist_group(groups[item.nodeid]))
    if reorder:
        order = {id(item): n for n, item in enumerate(items)}
        items.sort(key=lambda it: (_rank(groups.get(it.nodeid), it), order[id(it)]))
    return groups
